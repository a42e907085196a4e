// The gateway's control plane seen from main(): Redis writer, estimate service and metrics,
// built only when the `estimates` feature is on. main() drives it from the control thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prefix.hpp"
#include "sample.hpp"
#include "worker.hpp"

namespace spand {

struct ControlOptions {
  std::string redis_url;                         // "" = no Redis; redis://[user:password@]host:port
  std::vector<std::string> redis_cluster_seeds;  // host:port of cluster nodes; non-empty = cluster
  std::string redis_password_file;               // read the password from a file instead of the URL
  uint32_t flush_interval_ms = 1000;
  uint32_t bucket_s = 10;
  uint32_t window_s = 300;
  uint32_t backlog_max_updates = 1'000'000;  // unflushed bucket updates kept while Redis is away
  uint32_t min_samples = 5;
  std::string grpc_listen;     // "" = no estimate service; e.g. "0.0.0.0:50051"
  std::string metrics_listen;  // "" = no /metrics; e.g. "0.0.0.0:9108"
  PrefixConfig prefix;
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  // Every sample the workers produce, on the control thread.
  virtual void on_sample(const Sample& s) = 0;
  // A worker saw a new inbound connection from `client` (the paper's active push).
  virtual void on_new_connection(const IpAddr& client, uint64_t ts_ns) = 0;
  // Called often (at least every few ms) with the newest capture time; flushes when due and
  // refreshes metrics from the workers' counters (plain reads, DPDK telemetry style).
  virtual void tick(uint64_t capture_now_ns, const std::vector<const Worker*>& workers) = 0;
  // End of input: last flush (bounded wait), then stop serving unless `keep_serving`.
  virtual void finish(bool keep_serving) = 0;
};

// Defined by the estimates component; returns nullptr with `error` set on bad options.
std::unique_ptr<ControlPlane> make_control_plane(const ControlOptions& opts, std::string& error);

}  // namespace spand
