#include "flow_table.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace spand {

// Zero pages on demand (not new[]: memory is committed only as it is used), in transparent huge
// pages where the kernel allows: a lookup lands on a random slot, which with 4 KiB pages means a
// page walk as well (huge pages made the packet loop about 1.6x faster). Hashing spreads even a
// few thousand flows over every 2 MiB region, so a busy table commits all of its memory_bytes()
// early: the price of the speed (README, "Roles, keys and tables").
void* map_zeroed(size_t bytes, size_t prefault_bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: fine if THP is off
  if (prefault_bytes > 0) {          // best effort, as the advice above
    madvise(p, std::min(bytes, prefault_bytes + 4095) & ~size_t(4095), MADV_POPULATE_WRITE);
  }
  return p;
}

void Unmap::operator()(void* p) const {
  if (p) munmap(p, bytes);
}

FlowTable::FlowTable(uint32_t capacity, bool prefault)
    : capacity_(capacity < 1 ? 1 : capacity),
      // Load factor at most 0.8 keeps linear-probe chains short.
      slots_(capacity_ + capacity_ / 4 + 2),
      tags_(static_cast<uint32_t*>(map_zeroed(size_t(slots_) * sizeof(uint32_t),
                                              prefault ? size_t(slots_) * sizeof(uint32_t) : 0)),
            Unmap{size_t(slots_) * sizeof(uint32_t)}),
      flows_(static_cast<Flow*>(map_zeroed(size_t(slots_) * sizeof(Flow),
                                           prefault ? size_t(slots_) * sizeof(Flow) : 0)),
             Unmap{size_t(slots_) * sizeof(Flow)}) {}

LossPool::LossPool(uint32_t capacity, uint32_t prefault_states)
    : capacity_(capacity),
      ahead_(std::min(prefault_states, capacity)),
      committed_(ahead_),
      states_(static_cast<LossState*>(map_zeroed(size_t(capacity) * sizeof(LossState),
                                                 size_t(prefault_states) * sizeof(LossState))),
              Unmap{size_t(capacity) * sizeof(LossState)}),
      free_(static_cast<uint32_t*>(map_zeroed(size_t(capacity) * sizeof(uint32_t),
                                              size_t(prefault_states) * sizeof(uint32_t))),
            Unmap{size_t(capacity) * sizeof(uint32_t)}) {}

namespace {
// Commits the whole pages covering bytes [from, to) of `base` (best effort, as map_zeroed()).
void populate(void* base, size_t from, size_t to) {
  const size_t lo = from & ~size_t(4095);
  const size_t hi = (to + 4095) & ~size_t(4095);
  if (hi > lo) madvise(static_cast<char*>(base) + lo, hi - lo, MADV_POPULATE_WRITE);
}
}  // namespace

uint32_t LossPool::commit_ahead(uint32_t peak_seen) {
  if (ahead_ == 0) return 0;  // states committed as used (files, tests)
  const uint32_t want = uint32_t(std::min<uint64_t>(uint64_t(peak_seen) + ahead_, capacity_));
  // Wait for half the margin to be used: one system call per ahead_ / 2 states, not per call.
  if (want <= committed_ + ahead_ / 2 && want != capacity_) return 0;
  if (want <= committed_) return 0;
  populate(states_.get(), size_t(committed_) * sizeof(LossState), size_t(want) * sizeof(LossState));
  populate(free_.get(), size_t(committed_) * sizeof(uint32_t), size_t(want) * sizeof(uint32_t));
  const uint32_t added = want - committed_;
  committed_ = want;
  return added;
}

uint32_t FlowTable::pick_victim(uint32_t hash) const {
  uint32_t best = UINT32_MAX;
  bool best_syn_only = false;
  uint32_t seen = 0;
  uint32_t i = home(tag_of(hash));
  for (uint32_t steps = 0; seen < kEvictWindow && steps < slots_; ++steps, i = next(i)) {
    if (tags_[i] == kEmpty) continue;  // full table: empty slots are rare, skip over them
    ++seen;
    const Flow& f = flows_[i];
    const bool syn_only = f.phase == FlowPhase::kSynOnly;
    if (best == UINT32_MAX || (syn_only && !best_syn_only) ||
        (syn_only == best_syn_only && f.last_ns < flows_[best].last_ns)) {
      best = i;
      best_syn_only = syn_only;
    }
  }
  return best;
}

void FlowTable::erase_slot(uint32_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole so lookups never
  // stop early at it.
  uint32_t hole = i;
  for (uint32_t j = next(i);; j = next(j)) {
    if (tags_[j] == kEmpty) break;
    const uint32_t h = home(tags_[j]);
    // Slot j may move to `hole` if its home is not in the cyclic range (hole, j].
    const bool home_in_range = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
    if (!home_in_range) {
      tags_[hole] = tags_[j];
      flows_[hole] = flows_[j];
      hole = j;
    }
  }
  tags_[hole] = kEmpty;
  --size_;
}

}  // namespace spand

namespace spand {

FlowKey make_key(const ParsedPacket& p, bool& src_is_lo) {
  FlowKey k;
  // Any total order makes the key canonical; word compares are cheaper than memcmp.
  const uint64_t s0 = p.src.word(0), d0 = p.dst.word(0), s1 = p.src.word(1), d1 = p.dst.word(1);
  src_is_lo = s0 != d0 ? s0 < d0 : s1 != d1 ? s1 < d1 : p.sport <= p.dport;
  if (src_is_lo) {
    k.lo_addr = p.src;
    k.hi_addr = p.dst;
    k.lo_port = p.sport;
    k.hi_port = p.dport;
  } else {
    k.lo_addr = p.dst;
    k.hi_addr = p.src;
    k.lo_port = p.dport;
    k.hi_port = p.sport;
  }
  return k;
}

uint32_t hash_key(const FlowKey& k) {
  // Symmetric by construction (the key is canonical); murmur-style 64-bit mixing.
  uint64_t w[4];
  std::memcpy(w, k.lo_addr.bytes.data(), 16);
  std::memcpy(w + 2, k.hi_addr.bytes.data(), 16);
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t(k.lo_port) << 16 | k.hi_port);
  for (uint64_t x : w) {
    h ^= x * 0xff51afd7ed558ccdull;
    h = (h << 31 | h >> 33) * 0xc4ceb9fe1a85ec53ull;
  }
  h ^= h >> 29;
  return uint32_t(h ^ (h >> 32));
}

}  // namespace spand
