// A minimal spandctl: dispatches subcommands. The estimate service's fuller spandctl (query,
// watch, top) replaces this file and keeps calling spandctl_cwnd_main for `cwnd`.
#include <cstring>
#include <iostream>

#include "spandctl_cwnd.h"

namespace {

constexpr int kExitUsage = 2;

void print_help(std::ostream& out) {
  out << "usage: spandctl <subcommand> [options]\n"
         "\n"
         "subcommands:\n"
         "  cwnd    optimal initial cwnd for a W_c and a transfer size (spandctl cwnd --help)\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help(std::cerr);
    return kExitUsage;
  }
  if (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_help(std::cout);
    return 0;
  }
  if (std::strcmp(argv[1], "cwnd") == 0) return spand::spandctl_cwnd_main(argc - 1, argv + 1);
  std::cerr << "spandctl: unknown subcommand '" << argv[1] << "'\n";
  print_help(std::cerr);
  return kExitUsage;
}
