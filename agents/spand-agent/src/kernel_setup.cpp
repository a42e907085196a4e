#include "kernel_setup.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dry_run_applier.hpp"
#include "exit_codes.hpp"
#include "spand_maps.h"

namespace spand::agent {

std::optional<int> start_kernel(AgentConfig& cfg, KernelSetup& out) {
  std::vector<uint16_t> tune_ports;
  for (const auto& pc : cfg.ports)
    if (pc.tune) tune_ports.push_back(pc.port);
  std::string err;
  if (cfg.dry_run) {
    bool bpf_possible = cfg.mode != Mode::kRoute;
    out.kernel = std::make_unique<DryRunApplier>(bpf_possible ? "bpf" : "route", bpf_possible);
    out.kernel->start(err);
    for (const std::string& dev : cfg.pace_devices)
      std::fprintf(stderr,
                   "spand-agent: dry-run: would install an htb root qdisc %x: with %u pacing "
                   "classes (%llu to %llu bytes/s) on %s\n",
                   SPAND_HTB_MAJOR, PacingQdiscs::classes_per_device(),
                   static_cast<unsigned long long>(spand_pace_bin_rate(0)),
                   static_cast<unsigned long long>(spand_pace_bin_rate(SPAND_PACE_BINS - 1)),
                   dev.c_str());
  } else {
    if (cfg.mode != Mode::kRoute) {
      // Before anything else changes: a second agent must not touch the first one's program,
      // pins or pacing qdiscs. Route mode pins nothing.
      int holder = 0;
      switch (out.pin_lock.acquire(cfg.pin_dir, err, holder)) {
        case PinDirLock::Result::kLocked:
          break;
        case PinDirLock::Result::kBusy:
          std::fprintf(stderr,
                       "spand-agent: another spand-agent%s holds %s: one agent per pin "
                       "directory (stop it, or give this one its own --pin-dir / agent.pin_dir)\n",
                       holder ? (" (pid " + std::to_string(holder) + ")").c_str() : "",
                       cfg.pin_dir.c_str());
          return kExitBusy;
        case PinDirLock::Result::kError:
          if (cfg.mode == Mode::kBpf) {
            std::fprintf(stderr, "spand-agent: bpf mode: %s\n", err.c_str());
            return kExitRuntime;
          }
          std::fprintf(stderr, "spand-agent: bpf unavailable (%s); using route mode\n",
                       err.c_str());
          cfg.mode = Mode::kRoute;
          break;
      }
    }
    if (cfg.mode != Mode::kRoute && !cfg.pace_devices.empty()) {
      // Before the program loads: it is built knowing whether the classes exist.
      out.pacing = std::make_unique<PacingQdiscs>(cfg.pace_devices);
      if (!out.pacing->start(err)) {
        std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
        return out.pacing->busy() ? kExitBusy : kExitRuntime;
      }
      std::fprintf(stderr, "spand-agent: pacing classes installed on %zu device(s)\n",
                   out.pacing->installed());
    }
    if (cfg.mode != Mode::kRoute) {
      auto b = std::make_unique<BpfApplier>(cfg.cgroup_path, cfg.kernel_hz, tune_ports,
                                            cfg.tune_outgoing, out.pacing != nullptr, cfg.pin_dir);
      b->set_prefix_lens(cfg.prefix_len_v4, cfg.prefix_len_v6);
      b->set_per_policy_networks(!cfg.prefix_map.empty());
      b->set_measure_trains(cfg.policy.path_rate && cfg.policy.window_rule == WindowRule::kRounds);
      if (b->start(err)) {
        out.bpf = b.get();
        out.kernel = std::move(b);
      } else if (cfg.mode == Mode::kBpf) {
        std::fprintf(stderr, "spand-agent: bpf mode: %s\n", err.c_str());
        return kExitRuntime;
      } else {
        std::fprintf(stderr, "spand-agent: bpf unavailable (%s); using route mode%s\n", err.c_str(),
                     out.pacing ? " (without pacing classes: only the program selects them)" : "");
        out.pacing.reset();
      }
    }
    if (!out.kernel) {
      auto r = std::make_unique<RouteApplier>();
      if (!r->start(err)) {
        std::fprintf(stderr, "spand-agent: route mode: %s\n", err.c_str());
        return kExitRuntime;
      }
      out.route = r.get();
      out.kernel = std::move(r);
    }
  }
  return std::nullopt;
}

}  // namespace spand::agent
