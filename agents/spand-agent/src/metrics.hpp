// /metrics for the agent's health (prometheus-cpp). No label carries a prefix or address.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "agent_core.hpp"
#include "tcp_info_sampler.hpp"

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
              size_t routes_installed, size_t pacing_devices,
              const std::vector<uint64_t>& program_stats);
  // TCP_INFO sampling: the sampler's counters, samples the service took by kind (cumulative),
  // samples dropped while the service was unreachable, sockets in the table now.
  void update_sampler(const SamplerCounters& c, const std::array<uint64_t, 3>& sent_by_kind,
                      uint64_t dropped, size_t tracked);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spand::agent
