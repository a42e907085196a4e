// What the fuzz targets share: a failed property is a crash (libFuzzer saves the input), and the
// link types an input's first byte picks from.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "dataplane/packet.hpp"

// A property every input must keep; a failure aborts with the condition's text.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace spand::fuzz {

inline constexpr LinkType kLinks[] = {LinkType::kEthernet,  LinkType::kRaw,  LinkType::kLinuxSll,
                                      LinkType::kLinuxSll2, LinkType::kIpv4, LinkType::kIpv6,
                                      LinkType::kNull,      LinkType::kLoop};
inline constexpr size_t kLinkCount = sizeof kLinks / sizeof kLinks[0];

}  // namespace spand::fuzz
