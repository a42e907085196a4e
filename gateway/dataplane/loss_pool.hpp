#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "dataplane/flow.hpp"
#include "dataplane/table_memory.hpp"

namespace spand {

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
