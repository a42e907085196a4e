#include "capture/stop_signals.hpp"

#include <csignal>

namespace spand {

namespace {
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void on_stop_signal(int) {
  g_stop_requested = 1;
}
}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  g_stop_requested = 0;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  installed_ = true;
}

bool StopSignals::requested() const {
  return g_stop_requested != 0;
}

void StopSignals::restore() {
  if (!installed_) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  installed_ = false;
}

}  // namespace spand
