#include "dataplane/flow_table.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace spand {

FlowTable::FlowTable(uint32_t capacity, uint32_t prefault_flows)
    : capacity_(capacity < 1 ? 1 : capacity),
      // Load factor at most 0.8 keeps linear-probe chains short.
      slots_(capacity_ + capacity_ / 4 + 2),
      table_(static_cast<Slot*>(map_zeroed(size_t(slots_) * sizeof(Slot),
                                           prefault_flows ? size_t(slots_) * sizeof(Slot) : 0)),
             Unmap{size_t(slots_) * sizeof(Slot)}),
      pool_(capacity_, prefault_flows) {}

uint32_t FlowTable::pick_victim(uint32_t hash, bool syn_newcomer) const {
  // Rank: SYN-only (half-open) first, then unverified (lone ACKs), then verified; least recently
  // seen within a rank. A newcomer that is not a SYN takes only an unverified flow's place
  // (UINT32_MAX: none in the window).
  uint32_t best = UINT32_MAX;
  int best_rank = 3;
  uint32_t seen = 0;
  uint32_t i = home(tag_of(hash));
  for (uint32_t steps = 0; seen < kEvictWindow && steps < slots_; ++steps, i = next(i)) {
    if (table_[i].tag == kEmpty) continue;  // full table: empty slots are rare, skip over them
    ++seen;
    const Flow& f = pool_.at(table_[i].flow);
    const int rank = f.phase == FlowPhase::kSynOnly ? 0 : f.verified ? 2 : 1;
    if (!syn_newcomer && rank != 1) continue;
    if (best == UINT32_MAX || rank < best_rank ||
        (rank == best_rank && f.last_ns < pool_.at(table_[best].flow).last_ns)) {
      best = i;
      best_rank = rank;
    }
  }
  return best;
}

uint32_t FlowTable::slot_of(const Flow& f, uint32_t hash) const {
  // The flow's probe run from its home slot holds it: found without comparing keys.
  const uint32_t index = pool_.index_of(f);
  uint32_t i = home(tag_of(hash));
  while (table_[i].flow != index || table_[i].tag == kEmpty) i = next(i);
  return i;
}

void FlowTable::erase_slot(uint32_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole so lookups never
  // stop early at it.
  pool_.give_back(table_[i].flow);
  uint32_t hole = i;
  for (uint32_t j = next(i);; j = next(j)) {
    if (table_[j].tag == kEmpty) break;
    const uint32_t h = home(table_[j].tag);
    // Slot j may move to `hole` if its home is not in the cyclic range (hole, j].
    const bool home_in_range = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
    if (!home_in_range) {
      table_[hole] = table_[j];
      hole = j;
    }
  }
  table_[hole].tag = kEmpty;
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

namespace {
// Bytes 8-11 of an IPv4-mapped address (0, 0, 0xff, 0xff) as hash_key() reads them.
inline uint32_t mapped_word() {
  static constexpr uint8_t kMarker[4] = {0, 0, 0xff, 0xff};
  uint32_t w;
  std::memcpy(&w, kMarker, 4);
  return w;
}
}  // namespace

FlowHashSecret FlowHashSecret::from_seed(uint64_t seed) {
  FlowHashSecret s;
  uint64_t x = seed;
  for (uint64_t& k : s.k) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    k = z ^ (z >> 31);
  }
  s.v4_terms = s.k[3] * mapped_word() + s.k[7] * mapped_word();
  return s;
}

uint32_t hash_key(const FlowKey& k, const FlowHashSecret& s) {
  // h = k0 + sum k[i] * x[i] (mod 2^64) over the nine 32-bit words; the high half is the hash.
  uint32_t w[8];
  std::memcpy(w, k.lo_addr.bytes.data(), 16);
  std::memcpy(w + 4, k.hi_addr.bytes.data(), 16);
  uint64_t h = s.k[0] + s.k[9] * (uint64_t(k.lo_port) << 16 | k.hi_port);
  // Both addresses IPv4-mapped (::ffff:a.b.c.d): words 0, 1, 4 and 5 are zero and words 2 and 6
  // the marker, so the sum is the same with their terms taken from v4_terms.
  const uint32_t marker = mapped_word();
  if ((w[0] | w[1] | w[4] | w[5]) == 0 && w[2] == marker && w[6] == marker) {
    return uint32_t((h + s.v4_terms + s.k[4] * w[3] + s.k[8] * w[7]) >> 32);
  }
  for (int i = 0; i < 8; ++i) h += s.k[i + 1] * w[i];
  return uint32_t(h >> 32);
}

FlowKey make_parsed_key(const ParsedPacket& p, const FlowHashSecret& s, bool& src_is_lo,
                        uint32_t& hash) {
  if (p.ip_version != 4) {
    const FlowKey k = make_key(p, src_is_lo);
    hash = hash_key(k, s);
    return k;
  }
  // Both addresses ::ffff:a.b.c.d: make_key()'s word compares come down to the last four
  // bytes, and hash_key() takes its IPv4 branch.
  uint32_t sa, da;
  std::memcpy(&sa, p.src.bytes.data() + 12, 4);
  std::memcpy(&da, p.dst.bytes.data() + 12, 4);
  src_is_lo = sa != da ? sa < da : p.sport <= p.dport;
  FlowKey k;
  k.lo_addr = src_is_lo ? p.src : p.dst;
  k.hi_addr = src_is_lo ? p.dst : p.src;
  k.lo_port = src_is_lo ? p.sport : p.dport;
  k.hi_port = src_is_lo ? p.dport : p.sport;
  const uint64_t h = s.k[0] + s.k[9] * (uint64_t(k.lo_port) << 16 | k.hi_port) + s.v4_terms +
                     s.k[4] * (src_is_lo ? sa : da) + s.k[8] * (src_is_lo ? da : sa);
  hash = uint32_t(h >> 32);
  return k;
}

}  // namespace spand
