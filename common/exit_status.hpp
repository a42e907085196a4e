// The exit statuses of every spand binary (spand-gateway, spand-estimates, spandctl,
// spand-agent): one table, docs/exit-status.md. A binary uses the rows that can happen to it;
// no two binaries give one number two meanings. 1 is not used: a status of 1 comes from
// something else (a wrapper, a shell), and a crash shows as 128 + the signal.
#pragma once

namespace spand::exit_status {

constexpr int kOk = 0;
// Bad usage, configuration or input: an unknown option, a value out of range, a configuration
// file error (FILE:LINE), a file an option names that cannot be read or is damaged.
constexpr int kUsage = 2;
// Runtime failure: the input was fine but the work could not be done (a port that cannot be
// bound, a server that cannot be reached or answers an error, the kernel refusing a program).
constexpr int kRuntime = 3;
// Capture loss (spand-gateway, live runs): frames lost before the gateway or the interface
// went away for a while; the results miss those packets.
constexpr int kCaptureLoss = 4;
// Records or samples lost after the gateway saw them: a write error on an output, samples that
// did not reach Redis (spand-gateway, spand-estimates).
constexpr int kDataLoss = 5;
// Busy: another instance holds something this one needs (spand-agent: the pin directory or a
// pacing device). Starting again will fail the same way until the other one stops.
constexpr int kBusy = 6;
// Missing privileges (spand-agent: capabilities such as CAP_BPF, CAP_NET_ADMIN).
constexpr int kPrivileges = 7;

}  // namespace spand::exit_status
