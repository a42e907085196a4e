// `spandctl cwnd`: prints cwnd_opt (DESIGN.md Eq. 1-4) for a W_c and a transfer size. A full
// spandctl dispatches to spandctl_cwnd_main with argv[0] = "cwnd" (the subcommand's name).
#pragma once

#include <ostream>

namespace spand {

// Exit codes: 0 success, 1 the computation failed (spand_strerror's text on `err`), 2 bad usage
// (a message and a hint to --help on `err`).
int spandctl_cwnd_run(int argc, char** argv, std::ostream& out, std::ostream& err);

// spandctl_cwnd_run on std::cout and std::cerr.
int spandctl_cwnd_main(int argc, char** argv);

}  // namespace spand
