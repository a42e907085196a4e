// The appliance's Prometheus metrics (README, "Prometheus metrics"): health of capture, Redis
// writes and the estimate service. Never a label whose values are prefixes or addresses.
// Thread-safe: gRPC threads observe requests, the control thread feeds worker counters and flushes.
#pragma once

#include <grpcpp/support/status_code_enum.h>
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

#include "packet.hpp"
#include "spand/v1/estimates.pb.h"
#include "worker.hpp"

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
};

class Metrics {
 public:
  Metrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void observe_rpc(RpcMethod m, grpc::StatusCode code, double seconds);
  void count_estimate(v1::Verdict v);
  // Totals since start; counters advance by the difference from the previous call.
  void set_capture_totals(const CaptureTotals& t);
  void set_writer_totals(const WriterTotals& t);
  void observe_flush(double seconds);

 private:
  static constexpr size_t kCodes = 17;  // grpc::StatusCode OK..UNAUTHENTICATED
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex totals_mu_;
  CaptureTotals last_capture_{};
  WriterTotals last_writer_{};

  prometheus::Counter* packets_;
  prometheus::Counter* bytes_;
  std::array<prometheus::Counter*, static_cast<size_t>(Drop::kCount)> drops_{};
  prometheus::Counter* drops_ring_full_;
  prometheus::Gauge* connections_active_;
  prometheus::Counter* connections_created_;
  prometheus::Counter* connections_evicted_;
  prometheus::Counter* samples_wc_;
  prometheus::Counter* samples_rtt_;
  prometheus::Counter* agent_samples_wc_;
  prometheus::Counter* agent_samples_rtt_;
  prometheus::Histogram* flush_duration_;
  prometheus::Counter* flush_errors_;
  prometheus::Gauge* backlog_;
  prometheus::Counter* backlog_dropped_;
  prometheus::Family<prometheus::Counter>* rpc_family_;
  std::array<std::array<std::atomic<prometheus::Counter*>, kCodes>,
             static_cast<size_t>(RpcMethod::kCount)>
      rpc_counts_{};
  std::array<prometheus::Histogram*, static_cast<size_t>(RpcMethod::kCount)> rpc_duration_{};
  prometheus::Counter* estimates_use_;
  prometheus::Counter* estimates_slow_;
};

}  // namespace spand
