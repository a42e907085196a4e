#include "dataplane/loss_pool.hpp"

#include <algorithm>

namespace spand {

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

}  // namespace spand
