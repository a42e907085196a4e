#include "metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <vector>

#include "process_metrics.hpp"

namespace spand::agent {

struct AgentMetrics::Impl {
  prometheus::Exposer exposer;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  // spand_build_info and process_*.
  std::shared_ptr<ProcessMetrics> process = std::make_shared<ProcessMetrics>("spand-agent");
  prometheus::Counter* applied;
  std::vector<prometheus::Counter*> skipped;
  prometheus::Counter* cache_hits;
  prometheus::Counter* grpc_errors;
  prometheus::Counter* map_uncovered;
  prometheus::Gauge* attached;
  prometheus::Gauge* routes;
  prometheus::Gauge* pacing_devices;
  std::vector<prometheus::Counter*> program;
  std::vector<uint64_t> last_program;
  CoreCounters last{};
  prometheus::Counter* sampled;
  prometheus::Counter* table_full;
  prometheus::Counter* tcp_dropped;
  prometheus::Gauge* tracked;
  std::array<prometheus::Counter*, 3> sent{};
  SamplerCounters last_sampler{};
  std::array<uint64_t, 3> last_sent{};
  uint64_t last_dropped = 0;
  uint64_t last_grpc_errors = 0;

  explicit Impl(const std::string& listen) : exposer(listen) {
    applied = &prometheus::BuildCounter()
                   .Name("spand_agent_estimates_applied_total")
                   .Help("Per-(port, prefix) policies written to the kernel")
                   .Register(*registry)
                   .Add({});
    auto& skip_family = prometheus::BuildCounter()
                            .Name("spand_agent_estimates_skipped_total")
                            .Help("Estimates not applied, by reason (kernel default kept)")
                            .Register(*registry);
    for (size_t i = 1; i < static_cast<size_t>(SkipReason::kCount); ++i)
      skipped.push_back(
          &skip_family.Add({{"reason", skip_reason_name(static_cast<SkipReason>(i))}}));
    cache_hits = &prometheus::BuildCounter()
                      .Name("spand_agent_cache_hits_total")
                      .Help("New connections whose prefix already had a cached estimate")
                      .Register(*registry)
                      .Add({});
    grpc_errors = &prometheus::BuildCounter()
                       .Name("spand_agent_grpc_errors_total")
                       .Help("Failed Get/Report calls and broken Watch streams")
                       .Register(*registry)
                       .Add({});
    map_uncovered = &prometheus::BuildCounter()
                         .Name("spand_agent_prefix_map_uncovered_total")
                         .Help("--prefix-map: lookups of client addresses no prefix covers")
                         .Register(*registry)
                         .Add({});
    attached = &prometheus::BuildGauge()
                    .Name("spand_agent_program_attached")
                    .Help("1 while the sock_ops program is attached")
                    .Register(*registry)
                    .Add({});
    routes = &prometheus::BuildGauge()
                  .Name("spand_agent_routes_installed")
                  .Help("Routes with spand metrics installed (route mode)")
                  .Register(*registry)
                  .Add({});
    pacing_devices = &prometheus::BuildGauge()
                          .Name("spand_agent_pacing_devices")
                          .Help("Devices carrying spand's HTB pacing classes (agent.pace_devices)")
                          .Register(*registry)
                          .Add({});
    auto& prog_family = prometheus::BuildCounter()
                            .Name("spand_agent_program_events_total")
                            .Help("Events counted by the sock_ops program")
                            .Register(*registry);
    // Same order as enum spand_stat in libspand/spand_maps.h.
    for (const char* ev :
         {"lookup",      "applied",       "iw_failed",      "clamp_failed",   "pacing_failed",
          "cc_failed",   "pacing_lifted", "clamp_raised",   "tune_applied",   "state_full",
          "rto_seeded",  "pace_classed",  "pace_unclassed", "pace_skipped",   "train_timed",
          "train_rated", "shared",        "expired",        "train_own_pace", "queue_cut",
          "queue_left",  "floor_paced",   "floor_left",     "queue_paced"})
      program.push_back(&prog_family.Add({{"event", ev}}));
    last_program.assign(program.size(), 0);
    sampled = &prometheus::BuildCounter()
                   .Name("spand_agent_tcp_info_sockets_sampled_total")
                   .Help("Socket snapshots read from sock_diag (one per socket per interval)")
                   .Register(*registry)
                   .Add({});
    table_full = &prometheus::BuildCounter()
                      .Name("spand_agent_tcp_info_table_full_total")
                      .Help("Socket snapshots skipped because the per-socket table was full")
                      .Register(*registry)
                      .Add({});
    tcp_dropped = &prometheus::BuildCounter()
                       .Name("spand_agent_tcp_info_samples_dropped_total")
                       .Help("TCP_INFO samples dropped while the service could not take them")
                       .Register(*registry)
                       .Add({});
    tracked = &prometheus::BuildGauge()
                   .Name("spand_agent_tcp_info_sockets_tracked")
                   .Help("Sockets in the TCP_INFO sampler's table")
                   .Register(*registry)
                   .Add({});
    auto& sent_family = prometheus::BuildCounter()
                            .Name("spand_agent_tcp_info_samples_sent_total")
                            .Help("TCP_INFO samples the service accepted through Report, by kind")
                            .Register(*registry);
    // Same order as TcpSampleKind.
    const char* kinds[] = {"rtt", "wc_loss", "wc_end"};
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = &sent_family.Add({{"kind", kinds[i]}});
    exposer.RegisterCollectable(registry);
    exposer.RegisterCollectable(process);
  }
};

AgentMetrics::AgentMetrics(const std::string& listen) : impl_(std::make_unique<Impl>(listen)) {}
AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::update(const CoreCounters& c, uint64_t grpc_errors, bool program_attached,
                          size_t routes_installed, size_t pacing_devices,
                          const std::vector<uint64_t>& program_stats) {
  Impl& m = *impl_;
  for (size_t i = 0; i < m.program.size() && i < program_stats.size(); ++i) {
    if (program_stats[i] >= m.last_program[i])
      m.program[i]->Increment(static_cast<double>(program_stats[i] - m.last_program[i]));
    m.last_program[i] = program_stats[i];
  }
  m.applied->Increment(static_cast<double>(c.applied_total - m.last.applied_total));
  for (size_t i = 1; i < static_cast<size_t>(SkipReason::kCount); ++i)
    m.skipped[i - 1]->Increment(static_cast<double>(c.skipped_total[i] - m.last.skipped_total[i]));
  m.cache_hits->Increment(static_cast<double>(c.cache_hits_total - m.last.cache_hits_total));
  m.grpc_errors->Increment(static_cast<double>(grpc_errors - m.last_grpc_errors));
  m.map_uncovered->Increment(
      static_cast<double>(c.prefix_map_uncovered_total - m.last.prefix_map_uncovered_total));
  m.attached->Set(program_attached ? 1 : 0);
  m.routes->Set(static_cast<double>(routes_installed));
  m.pacing_devices->Set(static_cast<double>(pacing_devices));
  m.last = c;
  m.last_grpc_errors = grpc_errors;
}

void AgentMetrics::update_sampler(const SamplerCounters& c,
                                  const std::array<uint64_t, 3>& sent_by_kind, uint64_t dropped,
                                  size_t tracked) {
  Impl& m = *impl_;
  m.sampled->Increment(
      static_cast<double>(c.sockets_sampled_total - m.last_sampler.sockets_sampled_total));
  m.table_full->Increment(
      static_cast<double>(c.table_full_total - m.last_sampler.table_full_total));
  for (size_t i = 0; i < m.sent.size(); ++i)
    m.sent[i]->Increment(static_cast<double>(sent_by_kind[i] - m.last_sent[i]));
  m.tcp_dropped->Increment(static_cast<double>(dropped - m.last_dropped));
  m.tracked->Set(static_cast<double>(tracked));
  m.last_sampler = c;
  m.last_sent = sent_by_kind;
  m.last_dropped = dropped;
}

}  // namespace spand::agent
