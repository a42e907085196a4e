// Everything the estimate side runs, assembled once for both hosts: the gateway's control plane
// (control_plane_impl.cpp) and the stateless replica (replica_main.cpp). Redis writer (gateway
// samples and agents' Report samples), a pool of Redis readers, the service core, Watch hub,
// gRPC server and the Prometheus exposer.
#pragma once

#include <prometheus/exposer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/control_plane.hpp"
#include "estimates/redis_store.hpp"
#include "estimates/sample_writer.hpp"
#include "service/estimates_core.hpp"
#include "service/metrics.hpp"
#include "service/service.hpp"
#include "service/watch_hub.hpp"

namespace spand {

// Several Redis connections behind one EstimateStore and AsyncWindowReader. Reads are queued;
// each connection has a reader thread that takes every read queued at that moment (up to
// `max_batch`) and sends them as one pipeline (one HMGET each, one round trip), then completes
// them from its own thread (estimates/window_reader.hpp: on a single node one send and replies
// decoded in place, on a Redis Cluster RedisStore's routing). Under load one syscall pair and one
// Redis wakeup serve many Gets; when idle a read goes out at once, alone. Up to `connections`
// pipelines are in flight. The queue's lock is never held across a Redis round trip. write and
// top_prefixes use a connection of their own.
class StorePool final : public EstimateStore, public AsyncWindowReader {
 public:
  StorePool(const RedisStoreOptions& opts, size_t connections, size_t max_batch = 256);
  // Stops the reader threads after they have answered every queued read.
  ~StorePool() override;
  // The same, before destruction (idempotent): a read queued afterwards is answered at once,
  // on the caller's thread, with ok = false and error "shutting down".
  void stop();
  StorePool(const StorePool&) = delete;
  StorePool& operator=(const StorePool&) = delete;

  void read_async(WindowReadOp* const* ops, size_t n) override;
  bool write(const std::vector<BucketUpdate>& updates, std::string& error) override;
  // Synchronous, through the same queue (Watch).
  bool read_window(const Prefix& prefix, uint64_t now_ns, Accumulator& out,
                   std::string& error) override;
  bool top_prefixes(uint64_t now_ns, size_t limit, std::vector<PrefixActivity>& out,
                    std::string& error) override;

  struct Stats {
    uint64_t reads = 0;
    uint64_t batches = 0;  // pipelines sent; reads / batches = mean coalescing
  };
  Stats stats() const;

 private:
  struct Reader;
  void run(Reader& r);

  std::vector<std::unique_ptr<Reader>> readers_;
  RedisStore misc_;  // write, top_prefixes
  size_t max_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // readers waiting for work
  std::deque<WindowReadOp*> queue_;   // guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  uint64_t reads_ = 0, batches_ = 0;  // guarded by mu_
  std::vector<std::thread> threads_;
};

// Time the service reasons in, set by its host: capture time in the gateway, the newest capture
// time stored in Redis (or wall time) in the replica.
class SettableClock final : public Clock {
 public:
  uint64_t now_ns() const override { return ns_.load(std::memory_order_relaxed); }
  void advance_to(uint64_t ns) {
    uint64_t cur = ns_.load(std::memory_order_relaxed);
    while (ns > cur && !ns_.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
    }
  }

 private:
  std::atomic<uint64_t> ns_{0};
};

// Why a writer does not start without --client-key-file (both programs write to Redis).
inline constexpr const char* kNoClientKeyError =
    "--client-key-file is required with Redis: every gateway and spand-estimates writing to one "
    "Redis needs the same secret key for client ids. The Debian package creates "
    "/etc/spand/client.key; elsewhere create one with\n"
    "  (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \\n' > /etc/spand/client.key)\n"
    "and give every writer of this Redis a copy. '--client-key-file public' uses the published "
    "key instead (replays, tests): with it client addresses can be chosen to win the W_c client "
    "tables";

struct StackOptions {
  ControlOptions control;
  CoreOptions core;             // prefix, min_samples and window come from `control`
  size_t read_connections = 1;  // Redis connections for Get reads, one reader thread each
  uint32_t watch_refresh_ms = 1000;
  uint32_t finish_wait_ms = 5000;  // bound on the last flush
  std::string program = "spand";   // prefix of the lines on stderr; spand_build_info
  bool capture_metrics = true;     // export the capture metrics (not in the replica)
  // A replica that writes nothing (spand-estimates --read-only): no sample writer, no client id
  // key needed, Report answered UNIMPLEMENTED. The gateway always writes.
  bool read_only = false;
  uint32_t error_line_interval_ms = 10'000;  // Redis trouble: at most one stderr line per interval
};

class ServiceStack final : public SampleSink {
 public:
  // nullptr with `error` on bad options or a port that cannot be bound; `status` (when given)
  // then gets the exit status that fits (common/exit_status.hpp): kRuntime for a port that
  // cannot be bound (in use, an address not on this host), kUsage otherwise. Redis need not be
  // up: the writer keeps a backlog and reconnects.
  static std::unique_ptr<ServiceStack> create(const StackOptions& opts, const Clock& clock,
                                              std::string& error, int* status = nullptr);
  ~ServiceStack() override;

  // Report (gRPC threads): queued, handed to the writer by tick() on the host's thread.
  void submit(const Sample& s) override;
  std::string refuses_reports() const override;
  // Host thread only (the writer's add/tick are single-threaded).
  void add(const Sample& s) {
    if (writer_) writer_->add(s);
  }
  // A finished connection's record: the loss figures in the store (SampleWriter::add_flow) and
  // the loss counters of /metrics (the same flows: server->client directions that carried data).
  void add_flow(const FlowRecord& r);
  void new_connection(const IpAddr& client);
  void tick(uint64_t capture_now_ns);
  void set_capture_totals(const CaptureTotals& t) { metrics_.set_capture_totals(t); }
  void set_port_drops(const std::vector<PortDropTotal>& rows) { metrics_.set_port_drops(rows); }
  // Last flush (bounded). False, with one line on stderr, when samples did not reach Redis:
  // updates still in the backlog or dropped from it during the run.
  bool finish();
  void shutdown();

  int grpc_port() const { return grpc_port_; }
  RedisStore& write_store() { return *write_store_; }
  EstimatesCore& core() { return *core_; }

 private:
  ServiceStack() = default;
  void publish_writer_metrics();
  bool start_grpc(std::string& error, int* status);  // create()'s last step
  void report_writer_trouble(std::chrono::steady_clock::time_point now);

  StackOptions opts_;
  const Clock* clock_ = nullptr;  // the service's "now" (capture time, or the store's clock)
  Metrics metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> process_metrics_;  // spand_build_info, process_*
  std::unique_ptr<RedisStore> write_store_;
  std::unique_ptr<SampleWriter> writer_;
  std::unique_ptr<StorePool> read_pool_;
  std::unique_ptr<EstimatesCore> core_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<EstimatesService> service_;
  std::unique_ptr<grpc::Server> server_;
  int grpc_port_ = 0;

  std::mutex report_mu_;
  std::vector<Sample> reports_;        // guarded by report_mu_
  std::vector<Sample> reports_spare_;  // host thread: swapped with reports_ to drain
  uint64_t agent_wc_ = 0, agent_rtt_ = 0;
  LossFigures flow_totals_;  // host thread: every add_flow's figures, for /metrics
  std::chrono::steady_clock::time_point last_metrics_{};
  std::chrono::steady_clock::time_point last_error_line_{};
  uint64_t reported_flush_errors_ = 0, reported_dropped_ = 0, reported_mismatches_ = 0;
};

}  // namespace spand
