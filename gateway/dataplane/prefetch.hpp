// Software prefetch the compiler keeps. GCC 12 deletes a loop whose only effect is
// __builtin_prefetch: FlowTable::prefetch_flow() compiled to a bare `ret` at -O2 and at -O3 with
// LTO, so no build had ever prefetched a flow (found with objdump, issue 16). A volatile asm is
// never deleted; other targets keep the builtin.
#pragma once

namespace spand {

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// The same, for a line about to be written: fetched in a state that lets the store commit at once.
inline void prefetch_line_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace spand
