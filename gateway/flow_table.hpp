// Per-worker connection table: open addressing with linear probing over a preallocated slot
// array, a 32-bit tag array probed first (cache friendly), backward-shift deletion (no
// tombstones). Never allocates after construction; one owner thread, no locks.
//
// Full-table policy: the table refuses to grow past `capacity` live flows. A new connection then
// evicts the least recently seen flow among the first kEvictWindow occupied slots of its probe
// sequence, preferring a SYN-only (half-open) flow; the caller finalizes the evicted flow
// (close reason "evicted") before it is overwritten, and counts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "flow.hpp"

namespace spand {

// Anonymous zero pages, committed by the kernel as they are first used (see map_zeroed()).
struct Unmap {
  size_t bytes;
  void operator()(void* p) const;
};
// `prefault_bytes` of it (from the start) are committed at once.
void* map_zeroed(size_t bytes, size_t prefault_bytes);

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
  // the victim before it is removed. Returns the new flow (never null: capacity >= 1).
  template <typename OnEvict>
  Flow* insert(const FlowKey& key, uint32_t hash, OnEvict&& on_evict) {
    if (size_ >= capacity_) {
      uint32_t victim = pick_victim(hash);
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
  uint32_t pick_victim(uint32_t hash) const;
  void erase_slot(uint32_t i);

  uint32_t capacity_;
  uint32_t slots_;
  uint32_t size_ = 0;
  uint32_t cursor_ = 0;
  std::unique_ptr<uint32_t[], Unmap> tags_;
  std::unique_ptr<Flow[], Unmap> flows_;
};

// The side pool of LossState (flow.hpp) for one worker's table. Sized for both directions of
// every table slot, so it cannot run out while the table holds the flows that use it (take()
// still answers 0 if it ever does). States are handed out last-freed first and fresh ones from
// the low end, so only the peak number in use is ever committed: memory follows the connections
// that saw a gap or a loss, not the table's capacity.
class LossPool {
 public:
  // `prefault_states`: how many to commit at start (a live port: no page fault on the packet
  // path until more than these are in use at once). commit_ahead() keeps as many committed
  // beyond the most ever in use.
  LossPool(uint32_t capacity, uint32_t prefault_states = 0);

  // A zeroed state's index (>= 1), or 0 when all are in use.
  uint32_t take() {
    uint32_t i;
    if (free_count_ > 0) {
      i = free_[--free_count_];
    } else if (fresh_ < capacity_) {
      i = ++fresh_;
    } else {
      return 0;
    }
    states_[i - 1] = LossState{};
    return i;
  }
  void give_back(uint32_t index) { free_[free_count_++] = index; }
  LossState& at(uint32_t index) { return states_[index - 1]; }
  void prefetch(uint32_t index) const { __builtin_prefetch(&states_[index - 1]); }

  uint32_t capacity() const { return capacity_; }
  uint32_t in_use() const { return fresh_ - free_count_; }
  uint32_t peak_in_use() const { return fresh_; }  // states ever committed

  // Control side, from another thread than the one taking states: commits the memory of the
  // states up to `peak_seen` + `prefault_states` (`peak_seen`: the worker's published
  // peak_in_use()) once less than half that margin is left, so that the packet path takes no
  // page fault while the states in use grow by less than prefault_states / 2 between two calls.
  // MADV_POPULATE_WRITE maps pages without writing to them: safe beside the owner's writes.
  // Returns the states committed by this call (0: nothing to do, no system call).
  uint32_t commit_ahead(uint32_t peak_seen);
  uint32_t committed() const { return committed_; }  // control side

 private:
  uint32_t capacity_;
  uint32_t ahead_;      // prefault_states
  uint32_t committed_;  // states whose memory is committed; touched by commit_ahead() only
  uint32_t fresh_ = 0;  // states handed out fresh so far: 1..fresh_ have been used
  uint32_t free_count_ = 0;
  std::unique_ptr<LossState[], Unmap> states_;
  std::unique_ptr<uint32_t[], Unmap> free_;
};

}  // namespace spand
