// Per-worker connection table: open addressing with linear probing over a preallocated slot
// array, a 32-bit tag array probed first (cache friendly), backward-shift deletion (no
// tombstones). Never allocates after construction; one owner thread, no locks.
//
// Full-table policy: the table refuses to grow past `capacity` live flows. A new connection then
// evicts the least recently seen flow among the first kEvictWindow occupied slots of its probe
// sequence, preferring a SYN-only (half-open) flow, then an unverified one (Flow::verified: a
// lone ACK); a newcomer that is not a SYN displaces only an unverified flow (else it is refused).
// The caller finalizes the evicted flow (close reason "evicted") before it is overwritten, and
// counts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "dataplane/flow.hpp"
#include "dataplane/table_memory.hpp"

namespace spand {

class FlowTable {
 public:
  static constexpr uint32_t kEvictWindow = 8;

  // `prefault`: commit all memory now instead of as slots are first used.
  explicit FlowTable(uint32_t capacity, bool prefault = false);

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return size_; }
  uint32_t slots() const { return slots_; }
  size_t memory_bytes() const { return size_t(slots_) * (sizeof(Flow) + sizeof(uint32_t)); }

  Flow* find(const FlowKey& key, uint32_t hash) {
    const uint32_t tag = tag_of(hash);
    for (uint32_t i = home(tag);; i = next(i)) {
      const uint32_t t = tags_[i];
      if (t == kEmpty) return nullptr;
      if (t == tag && flows_[i].key == key) return &flows_[i];
    }
  }

  // Starts loading the probe tag and the home slot of `hash` into the cache.
  void prefetch(uint32_t hash) const {
    const uint32_t i = home(tag_of(hash));
    __builtin_prefetch(&tags_[i]);
    const char* line = reinterpret_cast<const char*>(&flows_[i]);
    for (size_t off = 0; off < sizeof(Flow); off += 64) __builtin_prefetch(line + off);
  }

  // Inserts a new, zeroed flow for `key` (not present). When full, `on_evict(Flow&)` is called on
  // the victim before it is removed. Returns the new flow; null only when full and the newcomer
  // is not a SYN (`syn_newcomer` false: e.g. a lone ACK of a flood) and no unverified flow is
  // among the candidates: such a newcomer never displaces a verified or half-open connection.
  template <typename OnEvict>
  Flow* insert(const FlowKey& key, uint32_t hash, OnEvict&& on_evict, bool syn_newcomer = true) {
    if (size_ >= capacity_) {
      uint32_t victim = pick_victim(hash, syn_newcomer);
      if (victim == UINT32_MAX) return nullptr;
      on_evict(flows_[victim]);
      erase_slot(victim);
    }
    const uint32_t tag = tag_of(hash);
    uint32_t i = home(tag);
    while (tags_[i] != kEmpty) i = next(i);
    tags_[i] = tag;
    Flow* f = new (&flows_[i]) Flow{};  // slot memory is raw until first use (see constructor)
    f->key = key;
    ++size_;
    return f;
  }

  // Removes a flow returned by find()/insert(). Pointers to other flows may move.
  void erase(Flow* f) { erase_slot(static_cast<uint32_t>(f - flows_.get())); }

  // Visits up to `budget` slots from a rotating cursor; `fn(Flow&)` returns true to erase it.
  // Spreads timeout scanning over packets instead of a stop-the-world sweep.
  template <typename Fn>
  void sweep(uint32_t budget, Fn&& fn) {
    while (budget-- > 0) {
      const uint32_t i = cursor_;
      // The slot visited kSweepAhead packets from now: its tag and first line (key, phase,
      // last_ns) arrive meanwhile instead of stalling then.
      uint32_t ahead = i + kSweepAhead;
      if (ahead >= slots_) ahead -= slots_;
      if (ahead < slots_) {
        __builtin_prefetch(&tags_[ahead]);
        __builtin_prefetch(&flows_[ahead]);
      }
      if (tags_[i] != kEmpty && fn(flows_[i])) {
        erase_slot(i);  // a later flow may shift into slot i: look at i again
        continue;
      }
      cursor_ = next(cursor_);
    }
  }

  // Removes up to `budget` flows, calling `fn(Flow&)` on each first; resumable (the cursor
  // stays), so a caller can empty a large table in slices and drain its outputs in between.
  // Returns the number of flows left.
  template <typename Fn>
  uint32_t erase_some(uint32_t budget, Fn&& fn) {
    while (budget > 0 && size_ > 0) {
      const uint32_t i = cursor_;
      if (tags_[i] != kEmpty) {
        fn(flows_[i]);
        erase_slot(i);  // a later flow may shift into slot i: look at i again
        --budget;
      } else {
        cursor_ = next(cursor_);
      }
    }
    return size_;
  }

 private:
  static constexpr uint32_t kEmpty = 0;
  static constexpr uint32_t kSweepAhead = 8;
  static uint32_t tag_of(uint32_t hash) { return hash | 1u; }  // never kEmpty
  // Home slot of a tag (Lemire's multiply-shift range reduction: any slot count works). Tags
  // keep the hash, so deletion never rehashes keys.
  uint32_t home(uint32_t tag) const { return uint32_t((uint64_t(tag) * slots_) >> 32); }
  uint32_t next(uint32_t i) const { return i + 1 == slots_ ? 0 : i + 1; }
  uint32_t pick_victim(uint32_t hash, bool syn_newcomer) const;
  void erase_slot(uint32_t i);

  uint32_t capacity_;
  uint32_t slots_;
  uint32_t size_ = 0;
  uint32_t cursor_ = 0;
  std::unique_ptr<uint32_t[], Unmap> tags_;
  std::unique_ptr<Flow[], Unmap> flows_;
};

}  // namespace spand
