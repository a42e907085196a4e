// spand-agent's exit statuses: the rows of the table every spand binary shares
// (common/exit_status.hpp, docs/exit-status.md) that can happen to the agent. --help and the man
// page list them.
#pragma once

#include "exit_status.hpp"

namespace spand::agent {

enum ExitCode {
  kExitOk = exit_status::kOk,
  kExitUsage = exit_status::kUsage,
  kExitRuntime = exit_status::kRuntime,
  kExitBusy = exit_status::kBusy,  // another agent holds the pin directory or a pacing device
  kExitPrivileges = exit_status::kPrivileges
};

}  // namespace spand::agent
