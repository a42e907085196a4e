// What `--version` prints, the same shape for every spand binary:
//   spand-gateway 0.1.0 (git 1a2b3c4)
//   DPDK 22.11.11
//   gRPC 1.51.1
// The first line is what help2man puts in the man pages; one line per library the binary links,
// as that library reports its own version at run time.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "spand_version.h"  // SPAND_GIT_DESCRIBE; SPAND_VERSION comes from the build

namespace spand {

inline void print_version(const char* program,
                          const std::vector<std::pair<std::string, std::string>>& libraries) {
  std::printf("%s %s (git %s)\n", program, SPAND_VERSION, SPAND_GIT_DESCRIBE);
  for (const auto& [name, version] : libraries) {
    if (version.rfind(name, 0) == 0) {  // "DPDK 22.11.11", "libpcap version 1.10.3"
      std::printf("%s\n", version.c_str());
    } else {
      std::printf("%s %s\n", name.c_str(), version.c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace spand
