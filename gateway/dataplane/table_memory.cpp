#include "dataplane/table_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace spand {

// Zero pages on demand (not new[]: memory is committed only as it is used), in transparent huge
// pages where the kernel allows: a lookup lands on a random slot, which with 4 KiB pages means a
// page walk as well (huge pages made the packet loop about 1.6x faster). The flow table's slots
// are 8 bytes and its flows are in a StatePool filled from the low end, so what hashing spreads
// over every page is small (README, "Roles, keys and tables").
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

// Commits the whole pages covering bytes [from, to) of `base` (best effort, as map_zeroed()).
void populate(void* base, size_t from, size_t to) {
  const size_t lo = from & ~size_t(4095);
  const size_t hi = (to + 4095) & ~size_t(4095);
  if (hi > lo) madvise(static_cast<char*>(base) + lo, hi - lo, MADV_POPULATE_WRITE);
}

}  // namespace spand
