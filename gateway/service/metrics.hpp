// The appliance's Prometheus metrics (README, "Prometheus metrics"): health of capture, Redis
// writes and the estimate service. Never a label whose values are prefixes or addresses.
// Thread-safe: gRPC threads observe requests, the control thread feeds worker counters and flushes.
#pragma once

#include <grpcpp/support/status_code_enum.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/port_drops.hpp"
#include "dataplane/packet.hpp"
#include "dataplane/prefix.hpp"
#include "dataplane/worker.hpp"
#include "spand/v1/estimates.pb.h"

namespace spand {

enum class RpcMethod : uint8_t { kGet, kBatchGet, kWatch, kReport, kTop, kCount };
const char* rpc_method_name(RpcMethod m);

// Sums of WorkerCounters over all workers, fed to Metrics::set_capture_totals.
// Capture counters summed over the workers (worker.hpp's total_counters()).
using CaptureTotals = WorkerCounters;

// Writer counters, as totals since start (the writer owns them); fed on each tick.
struct WriterTotals {
  uint64_t flush_errors = 0;
  uint64_t backlog_updates = 0;  // bucket updates waiting for Redis now
  uint64_t backlog_dropped = 0;  // updates lost because the backlog was full
  uint64_t agent_samples_wc = 0;
  uint64_t agent_samples_rtt = 0;
  // Samples the writer refused (SampleWriter::add): stamped beyond wall clock + skew, W_c or
  // RTT beyond its bound.
  uint64_t rejected_future = 0;
  uint64_t rejected_wc_bound = 0;
  uint64_t rejected_rtt_bound = 0;
  uint64_t clock_clamped = 0;   // store clock writes cut to Redis TIME + skew
  uint64_t clock_repaired = 0;  // poisoned store clocks replaced
  // The client id key check (RedisStore::expect_client_key): checks that found another writer's
  // fingerprint in Redis, and whether this writer refuses to write now.
  uint64_t client_key_mismatches = 0;
  bool client_key_mismatch = false;
  uint64_t store_clock_ns =
      0;  // the service's "now": capture time (gateway), store clock (replica)
  // Report messages rejected, by ReportReject (estimates_core.hpp) order.
  std::array<uint64_t, 9> report_rejected{};
  // Answers by how their W_c was made (EstimatesCore::wc_by_median and friends).
  uint64_t wc_by_median = 0;
  uint64_t wc_by_mean = 0;
  uint64_t wc_clients_left_out = 0;
  // Network-aware clustering (--prefix-map): lookups of addresses no prefix of the map covers
  // (PrefixMapSource::uncovered) and the prefixes of the map in use (0 without a map).
  uint64_t prefix_map_uncovered = 0;
  uint64_t prefix_map_prefixes = 0;
};

// spand_grpc_request_duration_seconds{method}, observed without a lock: prometheus-cpp 1.0's
// Histogram::Observe takes a mutex on every call; here each bucket is an atomic counter and the
// exposition is built from them when scraped.
class RpcDurations final : public prometheus::Collectable {
 public:
  static constexpr std::array<double, 15> kBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                  0.002,   0.005,  0.01,    0.025,  0.05,
                                                  0.1,     0.5,    1,       10,     60};
  void observe(RpcMethod m, double seconds);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct PerMethod {
    std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets{};  // not cumulative; last: +Inf
    std::atomic<uint64_t> sum_ns{0};
  };
  std::array<PerMethod, static_cast<size_t>(RpcMethod::kCount)> methods_{};
};

class Metrics {
 public:
  Metrics();
  // What an exposer serves: the registry and the request durations, and the capture metrics
  // unless export_capture(false) (the replica captures nothing).
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const {
    if (!capture_) return {registry_, durations_};
    return {registry_, capture_registry_, durations_};
  }
  void export_capture(bool on) { capture_ = on; }

  void observe_rpc(RpcMethod m, grpc::StatusCode code, double seconds);
  void count_estimate(v1::Verdict v);
  // Totals since start; counters advance by the difference from the previous call.
  void set_capture_totals(const CaptureTotals& t);
  // Capture loss per port and cause (capture/port_drops.hpp's snapshot): totals since start,
  // spand_capture_port_dropped_total{port, cause} advances by the difference.
  void set_port_drops(const std::vector<PortDropTotal>& rows);
  void set_writer_totals(const WriterTotals& t);
  // Loss figures of every finished connection's server->client data (ServiceStack::add_flow),
  // totals since start: spand_server_flows_total{flight} from flows and never4.
  void set_flow_totals(const LossFigures& t);
  void observe_flush(double seconds);

 private:
  static constexpr size_t kCodes = 17;  // grpc::StatusCode OK..UNAUTHENTICATED
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> capture_registry_;
  std::shared_ptr<RpcDurations> durations_;
  bool capture_ = true;
  std::mutex totals_mu_;
  CaptureTotals last_capture_{};
  WriterTotals last_writer_{};
  LossFigures last_flows_{};

  prometheus::Counter* packets_;
  prometheus::Counter* bytes_;
  std::array<prometheus::Counter*, static_cast<size_t>(Drop::kCount)> drops_{};
  prometheus::Counter* drops_ring_full_;
  prometheus::Counter* drops_rtt_unmeasurable_;
  prometheus::Counter* capture_dropped_;
  prometheus::Counter* capture_interface_down_;
  prometheus::Family<prometheus::Counter>* port_dropped_family_;
  struct PortDropSeries {
    std::string port;
    CaptureDropCause cause;
    prometheus::Counter* counter;
    uint64_t last;
  };
  std::vector<PortDropSeries> port_dropped_;
  prometheus::Gauge* connections_active_;
  prometheus::Gauge* loss_states_;
  prometheus::Counter* connections_created_;
  prometheus::Counter* connections_evicted_;
  prometheus::Counter* samples_wc_;
  prometheus::Counter* samples_wc_slow_start_;
  prometheus::Counter* wc_unsound_seq_jump_;
  prometheus::Counter* wc_unsound_pickup_;
  prometheus::Counter* wc_unsound_evicted_;
  // [direction: 0 c2s, 1 s2c (dataplane Dir)][0 fast_retransmit, 1 timeout]
  prometheus::Counter* loss_events_[2][2]{};
  prometheus::Counter* samples_rtt_;
  prometheus::Counter* flows_never4_;
  prometheus::Counter* flows_reached4_;
  prometheus::Counter* agent_samples_wc_;
  prometheus::Counter* agent_samples_rtt_;
  prometheus::Histogram* flush_duration_;
  prometheus::Counter* flush_errors_;
  prometheus::Gauge* backlog_;
  prometheus::Counter* backlog_dropped_;
  prometheus::Counter* rejected_future_;
  prometheus::Counter* rejected_wc_;
  prometheus::Counter* rejected_rtt_;
  prometheus::Counter* clock_clamped_;
  prometheus::Counter* clock_repaired_;
  prometheus::Counter* client_key_mismatches_;
  prometheus::Gauge* client_key_mismatch_;
  prometheus::Counter* wc_by_median_;
  prometheus::Counter* wc_by_mean_;
  prometheus::Counter* wc_left_out_;
  prometheus::Gauge* store_clock_;
  prometheus::Counter* prefix_map_uncovered_;
  prometheus::Gauge* prefix_map_prefixes_;
  std::array<prometheus::Counter*, 9> report_rejected_{};
  prometheus::Family<prometheus::Counter>* rpc_family_;
  std::array<std::array<std::atomic<prometheus::Counter*>, kCodes>,
             static_cast<size_t>(RpcMethod::kCount)>
      rpc_counts_{};
  prometheus::Counter* estimates_use_;
  prometheus::Counter* estimates_slow_;
};

}  // namespace spand
