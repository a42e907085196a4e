// The gateway's control plane seen from main(): Redis writer, estimate service and metrics,
// built only when the `estimates` feature is on. main() drives it from the control thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/flow_record.hpp"
#include "dataplane/prefix.hpp"
#include "dataplane/sample.hpp"
#include "dataplane/worker.hpp"
#include "estimates/estimates_options.hpp"

namespace spand {

// The estimate side's options (Redis, window, prefix scope) plus where the service listens.
struct ControlOptions : EstimatesOptions {
  std::string grpc_listen;     // "" = no estimate service; e.g. "0.0.0.0:50051"
  std::string metrics_listen;  // "" = no /metrics; e.g. "0.0.0.0:9108"
  // gRPC transport security (docs/api.md, "Security"): PEM files; "" = not used.
  std::string grpc_tls_cert, grpc_tls_key, grpc_client_ca;
  std::string report_token_file;      // Report needs "authorization: Bearer <first line>"
  uint32_t report_rate_per_s = 1000;  // Report messages per second per client (0 = no limit)
  // Distinct client addresses one Report caller may add per prefix and window (0 = no cap).
  uint32_t report_max_clients = 8;
  uint32_t max_cwnd_opt = 512;  // cap on the cwnd_opt the service answers (0 = none)
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  // Every sample the workers produce, on the control thread.
  virtual void on_sample(const Sample& s) = 0;
  // A worker saw a new inbound connection from `client` (the paper's active push).
  virtual void on_new_connection(const IpAddr& client, uint64_t ts_ns) = 0;
  // Every finished connection's record, on the control thread (the store's loss figures and the
  // loss counters).
  virtual void on_flow(const FlowRecord& r) = 0;
  // Called often (at least every few ms) with the newest capture time; flushes when due and
  // refreshes metrics from the workers' counters (plain reads, DPDK telemetry style).
  virtual void tick(uint64_t capture_now_ns, const std::vector<const Worker*>& workers) = 0;
  // End of input: last flush (bounded wait), then stop serving unless `keep_serving`. False
  // when samples did not reach Redis (said on stderr): main() exits with status 5.
  virtual bool finish(bool keep_serving) = 0;
};

// Defined by the estimates component; returns nullptr with `error` set on bad options or a port
// that cannot be bound, and `status` (when given) the exit status (ServiceStack::create).
std::unique_ptr<ControlPlane> make_control_plane(const ControlOptions& opts, std::string& error,
                                                 int* status = nullptr);

}  // namespace spand
