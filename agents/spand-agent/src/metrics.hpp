// /metrics for the agent's health (prometheus-cpp). No label carries a prefix or address.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent_core.hpp"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace spand::agent {

class AgentMetrics {
 public:
  // Listens on `listen` ("127.0.0.1:9464"); throws std::exception when it cannot bind.
  explicit AgentMetrics(const std::string& listen);
  ~AgentMetrics();
  // `program_stats`: the sock_ops program's counters (SPAND_STAT_*), empty outside BPF mode.
  void update(const CoreCounters& c, uint64_t grpc_errors, bool program_attached,
              size_t routes_installed, const std::vector<uint64_t>& program_stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spand::agent
