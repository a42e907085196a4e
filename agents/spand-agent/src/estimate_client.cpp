#include "estimate_client.hpp"

#include <cstdio>
#include <string>

#include "exit_codes.hpp"
#include "file_source.hpp"
#ifdef SPAND_AGENT_GRPC
#include "client_channel.hpp"
#include "grpc_source.hpp"
#endif

namespace spand::agent {

std::optional<int> open_estimate_client(const AgentConfig& cfg, EstimateClient& out) {
  if (!cfg.estimates_file.empty()) {
    auto fs = std::make_unique<FileEstimateSource>(cfg.estimates_file);
    std::string err;
    if (!fs->load(err)) {
      std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
      return kExitUsage;
    }
    out.source = std::move(fs);
    return std::nullopt;
  }
#ifdef SPAND_AGENT_GRPC
  const ClientTls tls{cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.tls_server_name};
  std::string err;
  std::string token;
  auto channel = make_client_channel(cfg.estimate_server, tls, "--tls-", err);
  if (!channel || !read_report_token(cfg.report_token_file, "--report-token-file", token, err)) {
    std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
    return kExitUsage;
  }
  auto gs = std::make_unique<GrpcEstimateSource>(std::move(channel), cfg.grpc_deadline_ms,
                                                 std::move(token));
  out.grpc = gs.get();
  out.source = std::move(gs);
  return std::nullopt;
#else
  std::fprintf(stderr, "spand-agent: built without gRPC; use --estimates-file\n");
  return kExitUsage;
#endif
}

}  // namespace spand::agent
