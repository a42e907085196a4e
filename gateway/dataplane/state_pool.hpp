// A pool of fixed-size states (flows, LossStates) for one worker: reserved for `capacity` at
// start, committed only as far as the most ever in use. States are handed out last-freed first
// and fresh ones from the low end, so memory follows the peak number in use, not the capacity,
// and a state just freed (still in cache) is the next one taken.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "dataplane/prefetch.hpp"
#include "dataplane/table_memory.hpp"

namespace spand {

template <typename T>
class StatePool {
 public:
  // `prefault_states`: how many to commit at start (a live port: no page fault on the packet
  // path until more than these are in use at once). commit_ahead() keeps as many committed
  // beyond the most ever in use.
  explicit StatePool(uint32_t capacity, uint32_t prefault_states = 0)
      : capacity_(capacity),
        ahead_(std::min(prefault_states, capacity)),
        committed_(ahead_),
        states_(
            static_cast<T*>(map_zeroed(size_t(capacity) * sizeof(T), size_t(ahead_) * sizeof(T))),
            Unmap{size_t(capacity) * sizeof(T)}),
        free_(static_cast<uint32_t*>(map_zeroed(size_t(capacity) * sizeof(uint32_t),
                                                size_t(ahead_) * sizeof(uint32_t))),
              Unmap{size_t(capacity) * sizeof(uint32_t)}) {}

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
    states_[i - 1] = T{};
    return i;
  }
  void give_back(uint32_t index) { free_[free_count_++] = index; }
  // Starts loading, for writing, the lines of the state the next take() returns (unless one is
  // given back meanwhile, which is in cache): take() zeroes the whole state, and stores to lines
  // not in cache fill the store buffer and stop the core.
  void prefetch_next_for_write() const {
    uint32_t i;
    if (free_count_ > 0) {
      i = free_[free_count_ - 1];
    } else if (fresh_ < capacity_) {
      i = fresh_ + 1;
    } else {
      return;
    }
    const char* line = reinterpret_cast<const char*>(&states_[i - 1]);
    for (size_t off = 0; off < sizeof(T); off += 64) prefetch_line_for_write(line + off);
  }
  T& at(uint32_t index) { return states_[index - 1]; }
  const T& at(uint32_t index) const { return states_[index - 1]; }
  uint32_t index_of(const T& state) const { return uint32_t(&state - states_.get()) + 1; }
  void prefetch(uint32_t index) const { prefetch_line(&states_[index - 1]); }

  uint32_t capacity() const { return capacity_; }
  uint32_t in_use() const { return fresh_ - free_count_; }
  uint32_t peak_in_use() const { return fresh_; }  // states ever committed

  // Control side, from another thread than the one taking states: commits the memory of the
  // states up to `peak_seen` + `prefault_states` (`peak_seen`: the owner's published
  // peak_in_use()) once less than half that margin is left, so that the packet path takes no
  // page fault while the states in use grow by less than prefault_states / 2 between two calls.
  // MADV_POPULATE_WRITE maps pages without writing to them: safe beside the owner's writes.
  // Returns the states committed by this call (0: nothing to do, no system call).
  uint32_t commit_ahead(uint32_t peak_seen) {
    if (ahead_ == 0) return 0;  // states committed as used (files, tests)
    const uint32_t want = uint32_t(std::min<uint64_t>(uint64_t(peak_seen) + ahead_, capacity_));
    // Wait for half the margin to be used: one system call per ahead_ / 2 states, not per call.
    if (want <= committed_ + ahead_ / 2 && want != capacity_) return 0;
    if (want <= committed_) return 0;
    populate(states_.get(), size_t(committed_) * sizeof(T), size_t(want) * sizeof(T));
    populate(free_.get(), size_t(committed_) * sizeof(uint32_t), size_t(want) * sizeof(uint32_t));
    const uint32_t added = want - committed_;
    committed_ = want;
    return added;
  }
  uint32_t committed() const { return committed_; }  // control side

 private:
  uint32_t capacity_;
  uint32_t ahead_;      // prefault_states
  uint32_t committed_;  // states whose memory is committed; touched by commit_ahead() only
  uint32_t fresh_ = 0;  // states handed out fresh so far: 1..fresh_ have been used
  uint32_t free_count_ = 0;
  std::unique_ptr<T[], Unmap> states_;
  std::unique_ptr<uint32_t[], Unmap> free_;
};

}  // namespace spand
