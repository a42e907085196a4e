// The kernel-setter interface. BpfApplier (sock_ops + LPM map), RouteApplier (rtnetlink route
// metrics) and DryRunApplier (prints) implement it; the core never touches the kernel itself.
#pragma once

#include <string>

#include "policy.hpp"

namespace spand::agent {

class KernelApplier {
 public:
  virtual ~KernelApplier() = default;
  virtual const char* name() const = 0;
  // Whether policies are per local port (BPF) or only per prefix (routes).
  virtual bool per_port() const = 0;
  // Attaches / cleans what a previous instance left. false with `error` set on failure.
  virtual bool start(std::string& error) = 0;
  // Installs or replaces the policy for policy.key.
  virtual bool upsert(const KernelPolicy& policy, std::string& error) = 0;
  virtual bool remove(const PolicyKey& key, std::string& error) = 0;
  // Moves the deadline (KernelPolicy::expires_s) of an installed policy, otherwise unchanged.
  // Appliers whose kernel state has no deadline (routes, dry run) have nothing to do.
  virtual bool renew(const KernelPolicy& policy, std::string& error) {
    (void)policy;
    (void)error;
    return true;
  }
  // Detaches and removes everything this applier installed.
  virtual void stop() = 0;
  // Whether the program is attached (BPF) / the applier is active.
  virtual bool active() const = 0;
};

}  // namespace spand::agent
