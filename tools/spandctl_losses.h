// `spandctl losses`: TCP Smart Framing's loss analysis (Mellia, Meo, Casetti, ToN 2005), as Tstat
// reports it, from spand-gateway's --flows-out: per flow-size class and per class of the flight
// at the loss, the share of loss events recovered by fast retransmit and by timeout, what the
// timeouts cost in completion time, and the share of flows whose flight never reached 4
// segments (too few for three duplicate ACKs). Offline: no server.
#pragma once

#include <istream>
#include <ostream>

namespace spand {

// Exit codes: 0 success, 1 the input is not flow records (the line and why on `err`), 2 bad
// usage.
int spandctl_losses_run(int argc, char** argv, std::ostream& out, std::ostream& err);

// spandctl_losses_run on std::cout and std::cerr.
int spandctl_losses_main(int argc, char** argv);

}  // namespace spand
