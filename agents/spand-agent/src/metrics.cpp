#include "metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <vector>

namespace spand::agent {

struct AgentMetrics::Impl {
  prometheus::Exposer exposer;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Counter* applied;
  std::vector<prometheus::Counter*> skipped;
  prometheus::Counter* cache_hits;
  prometheus::Counter* grpc_errors;
  prometheus::Gauge* attached;
  prometheus::Gauge* routes;
  std::vector<prometheus::Counter*> program;
  std::vector<uint64_t> last_program;
  CoreCounters last{};
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
    auto& prog_family = prometheus::BuildCounter()
                            .Name("spand_agent_program_events_total")
                            .Help("Events counted by the sock_ops program")
                            .Register(*registry);
    // Same order as enum spand_stat in bpf/spand_maps.h.
    for (const char* ev :
         {"lookup", "applied", "iw_failed", "clamp_failed", "pacing_failed", "cc_failed",
          "pacing_lifted", "clamp_raised", "tune_applied", "state_full", "rto_seeded"})
      program.push_back(&prog_family.Add({{"event", ev}}));
    last_program.assign(program.size(), 0);
    exposer.RegisterCollectable(registry);
  }
};

AgentMetrics::AgentMetrics(const std::string& listen) : impl_(std::make_unique<Impl>(listen)) {}
AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::update(const CoreCounters& c, uint64_t grpc_errors, bool program_attached,
                          size_t routes_installed, const std::vector<uint64_t>& program_stats) {
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
  m.attached->Set(program_attached ? 1 : 0);
  m.routes->Set(static_cast<double>(routes_installed));
  m.last = c;
  m.last_grpc_errors = grpc_errors;
}

}  // namespace spand::agent
