#pragma once

#include "dataplane/flow.hpp"
#include "dataplane/state_pool.hpp"

namespace spand {

// The side pool of LossState (flow.hpp) for one worker's table. Sized for both directions of
// every table slot, so it cannot run out while the table holds the flows that use it (take()
// still answers 0 if it ever does); only the peak number in use is ever committed: memory
// follows the connections that saw a gap or a loss, not the table's capacity.
using LossPool = StatePool<LossState>;

}  // namespace spand
