// Where the agent's estimates come from: a static JSON file (--estimates-file) or the spand.v1
// service (--server, with TLS and Report's token when configured).
#pragma once

#include <memory>
#include <optional>

#include "config.hpp"
#include "estimate.hpp"

namespace spand::agent {

class GrpcEstimateSource;

struct EstimateClient {
  std::unique_ptr<EstimateSource> source;
  GrpcEstimateSource* grpc = nullptr;  // the service's client (Report, error count); else null
};

// Opens the file or the service's channel. Returns the exit status (after saying why) when
// neither can be used: a file that does not load, bad TLS files or token, no gRPC in this build.
std::optional<int> open_estimate_client(const AgentConfig& cfg, EstimateClient& out);

}  // namespace spand::agent
