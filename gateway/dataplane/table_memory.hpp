// Memory for the data plane's preallocated tables: anonymous zero pages, in transparent huge pages
// where the kernel allows, committed as first used or ahead of use. Called when a table is built
// and from the control lcore (StatePool::commit_ahead), never per packet: the data plane's only
// system calls.
#pragma once

#include <cstddef>

namespace spand {

// Anonymous zero pages, committed by the kernel as they are first used (see map_zeroed()).
struct Unmap {
  size_t bytes;
  void operator()(void* p) const;
};
// `prefault_bytes` of it (from the start) are committed at once.
void* map_zeroed(size_t bytes, size_t prefault_bytes);
// Commits the whole pages covering bytes [from, to) of `base` (best effort, as map_zeroed()).
void populate(void* base, size_t from, size_t to);

}  // namespace spand
