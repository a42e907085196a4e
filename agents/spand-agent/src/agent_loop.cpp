#include "agent_loop.hpp"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "path_readings.hpp"
#include "sock_diag.hpp"
#include "tcp_info_report.hpp"
#ifdef SPAND_AGENT_GRPC
#include "grpc_source.hpp"
#endif

namespace spand::agent {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

// The gauges and counters of /metrics (docs/metrics.md), after each refresh.
void publish_metrics(AgentMetrics& metrics, const AgentConfig& cfg, const AgentCore& core,
                     const KernelSetup& kernel, uint64_t grpc_errors, const TcpInfoSampler& sampler,
                     const TcpReporter& tcp_reporter) {
  metrics.update(core.counters(), grpc_errors, kernel.kernel->active(),
                 kernel.route ? kernel.route->routes() : 0,
                 kernel.pacing ? kernel.pacing->installed() : 0,
                 kernel.bpf ? kernel.bpf->program_stats() : std::vector<uint64_t>{});
  if (cfg.sample_tcp_info)
    metrics.update_sampler(sampler.counters(), tcp_reporter.sent_by_kind, tcp_reporter.dropped,
                           sampler.tracked());
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

void run_loop(const LoopParts& parts, bool once) {
  const AgentConfig& cfg = parts.cfg;
  AgentCore& core = parts.core;
  Clock& clock = parts.clock;
  const KernelSetup& kernel = parts.kernel;
  [[maybe_unused]] GrpcEstimateSource* grpc = parts.grpc;
  AgentMetrics* metrics = parts.metrics;
  ReportSocket& report_socket = parts.report_socket;

  // The path toward each prefix, from TCP_INFO of every connection this host accepted.
  PathRates paths(cfg.policy.path_rate_window_s, cfg.policy.share_window_s);
  const bool sample_paths = cfg.policy.path_rate && cfg.policy.window_rule == WindowRule::kRounds;
  if (sample_paths) {
    core.set_path_rates(&paths);
    // The sock_ops program times first-flight ACK trains: the rate needs one in the window.
    paths.require_trains(kernel.bpf != nullptr);
    paths.hold_trains_s(kTrainHoldS);
    std::fprintf(stderr, "spand-agent: reading delivery rates every %u ms\n",
                 cfg.policy.path_rate_interval_ms);
  }
  double next_path_s = clock.now_s();
  std::vector<ReportItem> reports;
  TcpInfoSampler sampler(cfg.sample_max_sockets);
  TcpReporter tcp_reporter;
  if (cfg.sample_tcp_info)
    std::fprintf(stderr, "spand-agent: sampling tcp_info every %u ms (table of %u sockets)\n",
                 cfg.sample_interval_ms, cfg.sample_max_sockets);
  double next_refresh_s = clock.now_s();
  double next_sample_s = next_refresh_s;
  while (!g_stop.load()) {
    if (sample_paths && clock.now_s() >= next_path_s) {
      next_path_s = clock.now_s() + cfg.policy.path_rate_interval_ms / 1000.0;
      read_paths(core, paths, kernel.bpf, clock);
    }
    if (cfg.sample_tcp_info && clock.now_s() >= next_sample_s) {
      next_sample_s = clock.now_s() + cfg.sample_interval_ms / 1000.0;
#ifdef SPAND_AGENT_GRPC
      sample_tcp_info(cfg, sampler, tcp_reporter, cfg.dry_run ? nullptr : grpc);
#endif
    }
    if (clock.now_s() >= next_refresh_s) {
      next_refresh_s = clock.now_s() + cfg.refresh_interval_ms / 1000.0;
      if (parts.prefix_map) {
        std::string map_error;
        if (parts.prefix_map->reload_if_changed(map_error)) {
          core.set_prefix_map(parts.prefix_map->map());
          std::fprintf(stderr, "spand-agent: prefix map %s reloaded: %zu prefixes\n",
                       cfg.prefix_map.c_str(), parts.prefix_map->map()->size());
        } else if (!map_error.empty()) {
          std::fprintf(stderr, "spand-agent: %s; keeping the previous prefix map\n",
                       map_error.c_str());
        }
      }
      std::vector<TcpConn> conns;
      std::string derr;
      if (dump_tcp_sockets(conns, derr)) {
        for (const Prefix& p : accepted_remotes(conns, [&](uint16_t port) {
               const PortConfig* pc = cfg.port(port);
               return pc && pc->enabled;
             }))
          core.observe(p);
      }
      if (sample_paths) paths.expire(clock.now_s());
      core.tick();
      uint64_t grpc_errors = 0;
#ifdef SPAND_AGENT_GRPC
      if (grpc) {
        grpc_errors = grpc->errors();
        if (!reports.empty() && grpc->report(reports)) reports.clear();
        if (reports.size() > 10000) reports.clear();  // the service is down: drop, do not grow
      }
#endif
      if (metrics) publish_metrics(*metrics, cfg, core, kernel, grpc_errors, sampler, tcp_reporter);
      if (once) break;
    }
    double next_s = cfg.sample_tcp_info ? std::min(next_refresh_s, next_sample_s) : next_refresh_s;
    if (sample_paths) next_s = std::min(next_s, next_path_s);
    int timeout_ms = std::max(0, static_cast<int>((next_s - clock.now_s()) * 1000.0 + 0.999));
    pollfd pfd{report_socket.fd(), POLLIN, 0};
    int n = poll(&pfd, report_socket.fd() >= 0 ? 1 : 0, timeout_ms);
    if (n > 0 && (pfd.revents & POLLIN)) report_socket.receive(reports);
  }
  core.set_path_rates(nullptr);  // `paths` ends here
}

}  // namespace spand::agent
