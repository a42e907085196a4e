// spand-agent's exit statuses (--help and the man page list them).
#pragma once

namespace spand::agent {

enum ExitCode {
  kExitOk = 0,
  kExitRuntime = 1,
  kExitUsage = 2,
  kExitBusy = 3,  // another agent holds the pin directory or a pacing device
  kExitPrivileges = 4
};

}  // namespace spand::agent
