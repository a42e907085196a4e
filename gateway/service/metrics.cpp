#include "service/metrics.hpp"

#include <algorithm>
#include <limits>

namespace spand {
namespace {

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

void advance(prometheus::Counter* c, uint64_t now, uint64_t before) {
  if (now > before) c->Increment(double(now - before));
}

}  // namespace

const char* rpc_method_name(RpcMethod m) {
  switch (m) {
    case RpcMethod::kGet:
      return "Get";
    case RpcMethod::kBatchGet:
      return "BatchGet";
    case RpcMethod::kWatch:
      return "Watch";
    case RpcMethod::kReport:
      return "Report";
    case RpcMethod::kTop:
      return "Top";
    case RpcMethod::kCount:
      break;
  }
  return "unknown";
}

void RpcDurations::observe(RpcMethod m, double seconds) {
  PerMethod& pm = methods_[static_cast<size_t>(m)];
  // The first bound >= seconds (Prometheus buckets are "less or equal"); past the last: +Inf.
  const size_t i =
      size_t(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
  pm.buckets[i].fetch_add(1, std::memory_order_relaxed);
  pm.sum_ns.fetch_add(seconds > 0 ? uint64_t(seconds * 1e9) : 0, std::memory_order_relaxed);
}

std::vector<prometheus::MetricFamily> RpcDurations::Collect() const {
  prometheus::MetricFamily f;
  f.name = "spand_grpc_request_duration_seconds";
  f.help = "Time to handle a gRPC call (streams: the whole stream), by method";
  f.type = prometheus::MetricType::Histogram;
  for (size_t m = 0; m < methods_.size(); ++m) {
    const PerMethod& pm = methods_[m];
    prometheus::ClientMetric cm;
    cm.label.push_back({"method", rpc_method_name(static_cast<RpcMethod>(m))});
    uint64_t cumulative = 0;
    for (size_t i = 0; i < pm.buckets.size(); ++i) {
      cumulative += pm.buckets[i].load(std::memory_order_relaxed);
      prometheus::ClientMetric::Bucket b;
      b.cumulative_count = cumulative;
      b.upper_bound = i < kBounds.size() ? kBounds[i] : std::numeric_limits<double>::infinity();
      cm.histogram.bucket.push_back(b);
    }
    cm.histogram.sample_count = cumulative;
    cm.histogram.sample_sum = double(pm.sum_ns.load(std::memory_order_relaxed)) / 1e9;
    f.metric.push_back(std::move(cm));
  }
  return {std::move(f)};
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      capture_registry_(std::make_shared<prometheus::Registry>()),
      durations_(std::make_shared<RpcDurations>()) {
  using namespace prometheus;
  Registry& r = *registry_;
  // Capture metrics in a registry of their own: only a host that captures exports them.
  Registry& cr = *capture_registry_;
  packets_ = &BuildCounter()
                  .Name("spand_packets_received_total")
                  .Help("Frames read from the capture source")
                  .Register(cr)
                  .Add({});
  bytes_ = &BuildCounter()
                .Name("spand_bytes_received_total")
                .Help("Bytes on the wire of the frames read from the capture source")
                .Register(cr)
                .Add({});
  auto& drops = BuildCounter()
                    .Name("spand_drops_total")
                    .Help("Frames or samples not used, by reason")
                    .Register(cr);
  for (size_t i = 1; i < drops_.size(); ++i) {
    drops_[i] = &drops.Add({{"reason", drop_name(static_cast<Drop>(i))}});
  }
  drops_ring_full_ = &drops.Add({{"reason", "sample_ring_full"}});
  drops_rtt_unmeasurable_ = &drops.Add({{"reason", "rtt_below_clock_resolution"}});
  capture_dropped_ = &BuildCounter()
                          .Name("spand_capture_dropped_total")
                          .Help(
                              "Frames the kernel or the NIC dropped before the gateway saw them "
                              "(libpcap ps_drop + ps_ifdrop, DPDK imissed + rx_nombuf)")
                          .Register(cr)
                          .Add({});
  port_dropped_family_ =
      &BuildCounter()
           .Name("spand_capture_port_dropped_total")
           .Help(
               "Frames dropped before the gateway saw them, per capture port or interface and "
               "cause (DPDK imissed, rx_nombuf; libpcap kernel = ps_drop, interface = "
               "ps_ifdrop); spand_capture_dropped_total is their sum")
           .Register(cr);
  capture_interface_down_ = &BuildCounter()
                                 .Name("spand_capture_interface_down_total")
                                 .Help("Times a live interface went down or away")
                                 .Register(cr)
                                 .Add({});
  connections_active_ = &BuildGauge()
                             .Name("spand_connections_active")
                             .Help("Connections in the flow tables now")
                             .Register(cr)
                             .Add({});
  loss_states_ = &BuildGauge()
                      .Name("spand_connection_directions_in_loss")
                      .Help(
                          "Connection directions holding a LossState now (they saw a gap or a "
                          "resend): 64 bytes each besides the flow table")
                      .Register(cr)
                      .Add({});
  connections_created_ = &BuildCounter()
                              .Name("spand_connections_created_total")
                              .Help("Connections inserted into the flow tables")
                              .Register(cr)
                              .Add({});
  connections_evicted_ = &BuildCounter()
                              .Name("spand_connections_evicted_total")
                              .Help("Connections removed to make room in a full flow table")
                              .Register(cr)
                              .Add({});
  auto& samples = BuildCounter()
                      .Name("spand_samples_total")
                      .Help("W_c and RTT samples taken from capture, by kind")
                      .Register(cr);
  samples_wc_ = &samples.Add({{"kind", "wc"}});
  samples_rtt_ = &samples.Add({{"kind", "rtt"}});
  samples_wc_slow_start_ = &BuildCounter()
                                .Name("spand_wc_slow_start_samples_total")
                                .Help(
                                    "W_c samples taken at a connection's first loss in slow start "
                                    "(half its window, a lower bound; also counted in "
                                    "spand_samples_total{kind=\"wc\"})")
                                .Register(cr)
                                .Add({});
  // TCP Smart Framing's small windows as counters (docs/metrics.md): the flows of the prefixes'
  // loss figures, summed over every prefix (no prefix label). Their loss events by class are
  // counted by the data plane as they start, not here.
  auto& flows = BuildCounter()
                    .Name("spand_server_flows_total")
                    .Help(
                        "Finished connections whose server sent data, by whether its flight "
                        "ever reached 4 segments (fast retransmit needs 3 duplicate ACKs): "
                        "below_4 or reached_4")
                    .Register(cr);
  flows_never4_ = &flows.Add({{"flight", "below_4"}});
  flows_reached4_ = &flows.Add({{"flight", "reached_4"}});
  auto& unsound = BuildCounter()
                      .Name("spand_wc_unsound_total")
                      .Help(
                          "W_c samples not taken because the flight was not sound: seq_jump, "
                          "pickup (mid-stream, flights under 3 segments), evicted")
                      .Register(cr);
  wc_unsound_seq_jump_ = &unsound.Add({{"reason", "seq_jump"}});
  wc_unsound_pickup_ = &unsound.Add({{"reason", "pickup"}});
  wc_unsound_evicted_ = &unsound.Add({{"reason", "evicted"}});
  auto& losses = BuildCounter()
                     .Name("spand_loss_events_total")
                     .Help(
                         "Loss events the gateway saw, by how the sender recovered (class: "
                         "fast_retransmit, timeout; a resent SYN or SYN-ACK is a timeout) and by "
                         "the sender's direction (s2c: servers' data, c2s: clients')")
                     .Register(cr);
  for (size_t d = 0; d < 2; ++d) {
    for (size_t c = 0; c < 2; ++c) {
      loss_events_[d][c] = &losses.Add({{"class", c == 0 ? "fast_retransmit" : "timeout"},
                                        {"direction", d == 0 ? "c2s" : "s2c"}});
    }
  }
  // The service's, not the agent's: what agents sent, as the service received it.
  auto& agent = BuildCounter()
                    .Name("spand_report_samples_total")
                    .Help("Samples received from agents through Report, by kind")
                    .Register(r);
  agent_samples_wc_ = &agent.Add({{"kind", "wc"}});
  agent_samples_rtt_ = &agent.Add({{"kind", "rtt"}});
  flush_duration_ = &BuildHistogram()
                         .Name("spand_redis_flush_duration_seconds")
                         .Help("Time of one flush of bucket updates to Redis")
                         .Register(r)
                         .Add({}, Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                              0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  flush_errors_ = &BuildCounter()
                       .Name("spand_redis_flush_errors_total")
                       .Help("Flushes to Redis that failed (updates kept in the backlog)")
                       .Register(r)
                       .Add({});
  backlog_ = &BuildGauge()
                  .Name("spand_redis_backlog_updates")
                  .Help("Bucket updates waiting to be written to Redis")
                  .Register(r)
                  .Add({});
  backlog_dropped_ = &BuildCounter()
                          .Name("spand_redis_backlog_dropped_updates_total")
                          .Help("Bucket updates lost because the backlog was full")
                          .Register(r)
                          .Add({});
  auto& rejected = BuildCounter()
                       .Name("spand_samples_rejected_total")
                       .Help(
                           "Samples not aggregated by the Redis writer, by reason: future "
                           "(stamped beyond wall clock + skew), wc_bound, rtt_bound")
                       .Register(r);
  rejected_future_ = &rejected.Add({{"reason", "future"}});
  rejected_wc_ = &rejected.Add({{"reason", "wc_bound"}});
  rejected_rtt_ = &rejected.Add({{"reason", "rtt_bound"}});
  clock_clamped_ = &BuildCounter()
                        .Name("spand_redis_clock_clamped_total")
                        .Help("Store clock writes cut to the Redis server's time + skew")
                        .Register(r)
                        .Add({});
  clock_repaired_ = &BuildCounter()
                         .Name("spand_redis_clock_repaired_total")
                         .Help("Store clocks found beyond Redis time + skew and replaced")
                         .Register(r)
                         .Add({});
  client_key_mismatches_ =
      &BuildCounter()
           .Name("spand_redis_client_key_mismatch_total")
           .Help(
               "Checks that found another client id key's fingerprint in Redis: this writer's "
               "--client-key-file differs from the other writers'")
           .Register(r)
           .Add({});
  client_key_mismatch_ = &BuildGauge()
                              .Name("spand_redis_client_key_mismatch")
                              .Help(
                                  "1 while this writer refuses to write because its client id "
                                  "key differs from the one in Redis, else 0")
                              .Register(r)
                              .Add({});
  prefix_map_uncovered_ = &BuildCounter()
                               .Name("spand_prefix_map_uncovered_total")
                               .Help(
                                   "--prefix-map: lookups (samples, queries) of clients no prefix "
                                   "of the map covers, given the fixed /24 or /48")
                               .Register(r)
                               .Add({});
  prefix_map_prefixes_ = &BuildGauge()
                              .Name("spand_prefix_map_prefixes")
                              .Help("--prefix-map: prefixes in the map in use (0 without a map)")
                              .Register(r)
                              .Add({});
  store_clock_ = &BuildGauge()
                      .Name("spand_store_clock_seconds")
                      .Help(
                          "The service's now, seconds since the epoch: the newest capture time "
                          "(gateway) or the store's clock spand:{g}:clock (replica); 0 before the "
                          "first")
                      .Register(r)
                      .Add({});
  auto& report_rej = BuildCounter()
                         .Name("spand_report_rejected_total")
                         .Help("Report messages rejected, by reason")
                         .Register(r);
  static constexpr const char* kReportReasons[9] = {
      "bad_client", "no_value",  "no_clock",     "future",          "too_old",
      "wc_bound",   "rtt_bound", "rate_limited", "too_many_clients"};
  for (size_t i = 0; i < report_rejected_.size(); ++i)
    report_rejected_[i] = &report_rej.Add({{"reason", kReportReasons[i]}});
  rpc_family_ = &BuildCounter()
                     .Name("spand_grpc_requests_total")
                     .Help("gRPC calls handled, by method and status code")
                     .Register(r);
  for (size_t m = 0; m < rpc_counts_.size(); ++m) {
    const char* method = rpc_method_name(static_cast<RpcMethod>(m));
    // OK and INVALID_ARGUMENT exist from the start so rate() works on the first error; the
    // other codes appear when first seen.
    rpc_counts_[m][0] = &rpc_family_->Add({{"method", method}, {"code", kCodeNames[0]}});
    rpc_counts_[m][3] = &rpc_family_->Add({{"method", method}, {"code", kCodeNames[3]}});
  }
  auto& estimates = BuildCounter()
                        .Name("spand_estimates_total")
                        .Help("Estimates returned by Get and BatchGet, by verdict")
                        .Register(r);
  estimates_use_ = &estimates.Add({{"verdict", "use_estimate"}});
  estimates_slow_ = &estimates.Add({{"verdict", "slow_start"}});
  auto& wc = BuildCounter()
                 .Name("spand_estimates_wc_total")
                 .Help(
                     "Estimates with W_c samples, by how W_c was made: client_median (the "
                     "lower median of per-client means) or mean (a bucket without a client "
                     "table in the window)")
                 .Register(r);
  wc_by_median_ = &wc.Add({{"method", "client_median"}});
  wc_by_mean_ = &wc.Add({{"method", "mean"}});
  wc_left_out_ = &BuildCounter()
                      .Name("spand_estimates_wc_clients_left_out_total")
                      .Help(
                          "Estimates whose window had more W_c clients than the median's table "
                          "keeps (16, by smallest client id): the others' samples not in it")
                      .Register(r)
                      .Add({});
}

void Metrics::observe_rpc(RpcMethod m, grpc::StatusCode code, double seconds) {
  const size_t mi = static_cast<size_t>(m);
  const size_t ci = size_t(code) < kCodes ? size_t(code) : size_t(grpc::StatusCode::UNKNOWN);
  // The lock is taken only when a code is first seen, not on every request.
  prometheus::Counter* c = rpc_counts_[mi][ci].load(std::memory_order_acquire);
  if (!c) {
    std::lock_guard lock(totals_mu_);
    c = rpc_counts_[mi][ci].load(std::memory_order_relaxed);
    if (!c) {
      c = &rpc_family_->Add({{"method", rpc_method_name(m)}, {"code", kCodeNames[ci]}});
      rpc_counts_[mi][ci].store(c, std::memory_order_release);
    }
  }
  c->Increment();
  durations_->observe(m, seconds);
}

void Metrics::count_estimate(v1::Verdict v) {
  (v == v1::USE_ESTIMATE ? estimates_use_ : estimates_slow_)->Increment();
}

void Metrics::set_capture_totals(const CaptureTotals& t) {
  std::lock_guard lock(totals_mu_);
  const CaptureTotals& b = last_capture_;
  advance(packets_, t.frames, b.frames);
  advance(bytes_, t.bytes, b.bytes);
  for (size_t i = 1; i < drops_.size(); ++i) advance(drops_[i], t.drops[i], b.drops[i]);
  advance(drops_ring_full_, t.ring_full_samples, b.ring_full_samples);
  advance(drops_rtt_unmeasurable_, t.rtt_below_resolution, b.rtt_below_resolution);
  advance(capture_dropped_, t.capture_drops, b.capture_drops);
  advance(capture_interface_down_, t.capture_interface_down, b.capture_interface_down);
  advance(connections_created_, t.flows_created, b.flows_created);
  advance(connections_evicted_, t.flows_evicted, b.flows_evicted);
  advance(samples_wc_, t.samples_wc, b.samples_wc);
  advance(samples_wc_slow_start_, t.samples_wc_slow_start, b.samples_wc_slow_start);
  advance(samples_rtt_, t.samples_rtt, b.samples_rtt);
  advance(wc_unsound_seq_jump_, t.wc_unsound_seq_jump, b.wc_unsound_seq_jump);
  advance(wc_unsound_pickup_, t.wc_unsound_pickup, b.wc_unsound_pickup);
  advance(wc_unsound_evicted_, t.wc_unsound_evicted, b.wc_unsound_evicted);
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < 2; ++c)
      advance(loss_events_[d][c], t.loss_events[d][c], b.loss_events[d][c]);
  connections_active_->Set(double(t.active_flows));
  loss_states_->Set(double(t.loss_states));
  last_capture_ = t;
}

void Metrics::set_port_drops(const std::vector<PortDropTotal>& rows) {
  std::lock_guard lock(totals_mu_);
  for (const PortDropTotal& r : rows) {
    auto it = std::find_if(
        port_dropped_.begin(), port_dropped_.end(),
        [&r](const PortDropSeries& s) { return s.cause == r.cause && s.port == r.port; });
    if (it == port_dropped_.end()) {
      prometheus::Counter* c = &port_dropped_family_->Add(
          {{"port", r.port}, {"cause", capture_drop_cause_name(r.cause)}});
      it = port_dropped_.insert(port_dropped_.end(), {r.port, r.cause, c, 0});
    }
    advance(it->counter, r.total, it->last);
    it->last = std::max(it->last, r.total);
  }
}

void Metrics::set_writer_totals(const WriterTotals& t) {
  std::lock_guard lock(totals_mu_);
  const WriterTotals& b = last_writer_;
  advance(flush_errors_, t.flush_errors, b.flush_errors);
  advance(backlog_dropped_, t.backlog_dropped, b.backlog_dropped);
  advance(agent_samples_wc_, t.agent_samples_wc, b.agent_samples_wc);
  advance(agent_samples_rtt_, t.agent_samples_rtt, b.agent_samples_rtt);
  advance(rejected_future_, t.rejected_future, b.rejected_future);
  advance(rejected_wc_, t.rejected_wc_bound, b.rejected_wc_bound);
  advance(rejected_rtt_, t.rejected_rtt_bound, b.rejected_rtt_bound);
  advance(clock_clamped_, t.clock_clamped, b.clock_clamped);
  advance(clock_repaired_, t.clock_repaired, b.clock_repaired);
  advance(client_key_mismatches_, t.client_key_mismatches, b.client_key_mismatches);
  client_key_mismatch_->Set(t.client_key_mismatch ? 1 : 0);
  advance(wc_by_median_, t.wc_by_median, b.wc_by_median);
  advance(wc_by_mean_, t.wc_by_mean, b.wc_by_mean);
  advance(wc_left_out_, t.wc_clients_left_out, b.wc_clients_left_out);
  advance(prefix_map_uncovered_, t.prefix_map_uncovered, b.prefix_map_uncovered);
  prefix_map_prefixes_->Set(double(t.prefix_map_prefixes));
  for (size_t i = 0; i < report_rejected_.size(); ++i)
    advance(report_rejected_[i], t.report_rejected[i], b.report_rejected[i]);
  backlog_->Set(double(t.backlog_updates));
  store_clock_->Set(double(t.store_clock_ns) / 1e9);
  last_writer_ = t;
}

void Metrics::set_flow_totals(const LossFigures& t) {
  std::lock_guard lock(totals_mu_);
  const LossFigures& b = last_flows_;
  advance(flows_never4_, t.never4, b.never4);
  advance(flows_reached4_, t.flows - t.never4, b.flows - b.never4);
  last_flows_ = t;
}

void Metrics::observe_flush(double seconds) {
  flush_duration_->Observe(seconds);
}

}  // namespace spand
