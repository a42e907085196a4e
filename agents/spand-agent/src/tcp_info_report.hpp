// --sample-tcp-info: every sample_interval_ms, one TCP_INFO dump of the connections on the
// configured ports, W_c and RTT samples from it (TcpInfoSampler), and one Report call to the
// estimate service; what became of the samples is kept for /metrics.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "config.hpp"
#include "tcp_info_sampler.hpp"

namespace spand::agent {

class GrpcEstimateSource;

// TCP_INFO samples on their way to Report, and what became of them (for /metrics).
struct TcpReporter {
  std::vector<TcpSample> pending;
  std::array<uint64_t, 3> sent_by_kind{};
  uint64_t dropped = 0;
};

constexpr size_t kMaxPendingTcpSamples = 10000;  // the service is down: drop, do not grow

// One dump, its samples, one Report call. `grpc` null (dry run): samples are printed instead.
void sample_tcp_info(const AgentConfig& cfg, TcpInfoSampler& sampler, TcpReporter& rep,
                     GrpcEstimateSource* grpc);

}  // namespace spand::agent
