// SIGINT and SIGTERM while a source reads: a flag its loop polls instead of the default death, so
// the run stops between packets, closes open connections and prints its summary. The previous
// handlers come back at restore() or when the guard goes.
#pragma once

#include <signal.h>

namespace spand {

class StopSignals {
 public:
  StopSignals();  // installs the handlers (SA_RESTART: a blocked write resumes) and clears the flag
  ~StopSignals() { restore(); }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  void restore();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  bool installed_ = false;
};

}  // namespace spand
