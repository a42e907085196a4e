// How the agent reaches the kernel, chosen and started once: a dry run's printer; or BPF mode
// (the pin-directory lock, the HTB pacing classes, the sock_ops program loaded and attached to
// the cgroup); or route mode, which `auto` falls back to when BPF cannot start.
#pragma once

#include <memory>
#include <optional>

#include "applier.hpp"
#include "bpf_applier.hpp"
#include "config.hpp"
#include "pacing_qdisc.hpp"
#include "route_applier.hpp"

namespace spand::agent {

// Members in the order they start; destroyed the other way round: the program first, then the
// pacing classes it selects, then the lock that guards both.
struct KernelSetup {
  PinDirLock pin_lock;
  std::unique_ptr<PacingQdiscs> pacing;
  std::unique_ptr<KernelApplier> kernel;
  BpfApplier* bpf = nullptr;      // BPF mode: the program (train rates, its statistics)
  RouteApplier* route = nullptr;  // route mode: the routes installed

  // A later step failed: detach the program and remove the pacing classes.
  void undo() {
    kernel->stop();
    pacing.reset();
  }
};

// Starts the applier `cfg.mode` asks for (cfg.mode becomes kRoute when `auto` falls back).
// Returns the exit status (after saying why) when none can start: kExitBusy when another agent
// holds the pin directory or a pacing device, kExitRuntime otherwise.
std::optional<int> start_kernel(AgentConfig& cfg, KernelSetup& out);

}  // namespace spand::agent
