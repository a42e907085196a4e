// The congestion controls a policy may choose from: the kernel's list, with Scalable TCP
// registered first (a BPF struct_ops, scalable_cc.hpp) when the configuration wants it.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config.hpp"
#ifdef SPAND_AGENT_SCALABLE
#include "scalable_cc.hpp"
#endif

namespace spand::agent {

class CongestionControls {
 public:
  // Registers Scalable TCP when wanted (a dry run only says it would), then reads the list.
  // Returns the exit status (after saying why) when it cannot: kExitRuntime when registration
  // fails, kExitUsage when this build has no Scalable TCP.
  std::optional<int> start(const AgentConfig& cfg);
  const std::set<std::string>& available() const { return available_; }
  // Unregisters Scalable TCP if this agent registered it: after the sock_ops program is gone, so
  // that no new socket selects it.
  void stop();

 private:
  std::set<std::string> available_;
#ifdef SPAND_AGENT_SCALABLE
  std::unique_ptr<ScalableCc> scalable_;
#endif
};

}  // namespace spand::agent
