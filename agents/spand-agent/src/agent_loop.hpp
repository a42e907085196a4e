// The agent's main loop, until SIGTERM or SIGINT (or one refresh with --once). Three timers:
// the refresh (which prefixes have connections, AgentCore::tick(), pending Reports, /metrics)
// every refresh_interval_ms; the path readings (path_readings.hpp) every path_rate_interval_ms
// under the window rule `rounds`; the TCP_INFO samples (tcp_info_report.hpp) every
// sample_interval_ms with --sample-tcp-info. In between it waits on the report socket.
#pragma once

#include "agent_core.hpp"
#include "config.hpp"
#include "kernel_setup.hpp"
#include "metrics.hpp"
#include "prefix_map.hpp"
#include "report_socket.hpp"

namespace spand::agent {

class GrpcEstimateSource;

// What the loop drives; main builds each part and owns it.
struct LoopParts {
  const AgentConfig& cfg;
  AgentCore& core;
  Clock& clock;
  const KernelSetup& kernel;
  GrpcEstimateSource* grpc;  // null: estimates from a file (nothing to report to)
  AgentMetrics* metrics;     // null: no /metrics
  ReportSocket& report_socket;
  PrefixMapFile* prefix_map = nullptr;  // null: no --prefix-map; else re-read at each refresh
};

// SIGTERM and SIGINT end the loop (the handler only sets a flag).
void install_stop_handlers();

void run_loop(const LoopParts& parts, bool once);

}  // namespace spand::agent
