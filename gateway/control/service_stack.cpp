#include "control/service_stack.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "dataplane/prefix_map.hpp"
#include "estimates/window_reader.hpp"
#include "exit_status.hpp"
#include "process_metrics.hpp"

namespace spand {
namespace {
// Reports queued between two ticks; beyond this an agent flood is dropped, not buffered.
constexpr size_t kMaxQueuedReports = 1'000'000;
constexpr std::chrono::milliseconds kMetricsPeriod{250};
}  // namespace

// One reader thread's connection.
struct StorePool::Reader {
  std::unique_ptr<WindowReader> reader;
  std::vector<WindowRead*> reads;  // the batch as the reader takes it
};

StorePool::StorePool(const RedisStoreOptions& opts, size_t connections, size_t max_batch)
    : misc_(opts), max_batch_(std::max<size_t>(max_batch, 1)) {
  for (size_t i = 0; i < std::max<size_t>(connections, 1); ++i) {
    auto r = std::make_unique<Reader>();
    r->reader = make_window_reader(opts);
    r->reads.reserve(max_batch_);
    readers_.push_back(std::move(r));
  }
  for (auto& r : readers_) threads_.emplace_back([this, reader = r.get()] { run(*reader); });
}

StorePool::~StorePool() {
  stop();
}

void StorePool::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void StorePool::read_async(WindowReadOp* const* ops, size_t n) {
  if (n == 0) return;
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.insert(queue_.end(), ops, ops + n);
      queued = true;
    }
  }
  if (!queued) {  // stopped: no reader would take them
    for (size_t i = 0; i < n; ++i) {
      ops[i]->ok = false;
      ops[i]->error = "shutting down";
      ops[i]->complete();  // may free the op
    }
    return;
  }
  if (n == 1) {
    cv_.notify_one();
  } else {
    cv_.notify_all();
  }
}

void StorePool::run(Reader& r) {
  std::vector<WindowReadOp*> batch;
  batch.reserve(max_batch_);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and every read answered
    const size_t n = std::min(queue_.size(), max_batch_);
    batch.assign(queue_.begin(), queue_.begin() + ptrdiff_t(n));
    queue_.erase(queue_.begin(), queue_.begin() + ptrdiff_t(n));
    ++batches_;
    reads_ += n;
    lock.unlock();
    r.reads.assign(batch.begin(), batch.end());
    r.reader->read(r.reads.data(), n);
    for (size_t i = 0; i < n; ++i) batch[i]->complete();  // may free the op
    lock.lock();
  }
}

namespace {
// A synchronous read through the queue.
class WaitingRead final : public WindowReadOp {
 public:
  void complete() override {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_one();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};
}  // namespace

bool StorePool::read_window(const Prefix& prefix, uint64_t now_ns, Accumulator& out,
                            std::string& error) {
  WaitingRead read;
  read.prefix = prefix;
  read.now_ns = now_ns;
  WindowReadOp* op = &read;
  read_async(&op, 1);
  read.wait();
  if (!read.ok) {
    error = read.error;
    return false;
  }
  out = read.acc;
  return true;
}

StorePool::Stats StorePool::stats() const {
  std::lock_guard lock(mu_);
  return Stats{reads_, batches_};
}

bool StorePool::write(const std::vector<BucketUpdate>& updates, std::string& error) {
  return misc_.write(updates, error);
}

bool StorePool::top_prefixes(uint64_t now_ns, size_t limit, std::vector<PrefixActivity>& out,
                             std::string& error) {
  return misc_.top_prefixes(now_ns, limit, out, error);
}

std::unique_ptr<ServiceStack> ServiceStack::create(const StackOptions& opts, const Clock& clock,
                                                   std::string& error, int* status) {
  if (status) *status = exit_status::kUsage;
  std::unique_ptr<ServiceStack> s(new ServiceStack());
  s->opts_ = opts;
  s->clock_ = &clock;
  const ControlOptions& c = opts.control;
  if (c.redis_url.empty() && c.redis_cluster_seeds.empty()) {
    error = "the estimate service needs Redis (--redis URL or --redis-cluster seeds)";
    return nullptr;
  }
  RedisStoreOptions store_opts;
  if (!redis_store_options_from(c, store_opts, error)) return nullptr;
  // A writer's client ids need the deployment's key: no silent public default
  // (gateway/estimates/README.md, "Client ids").
  if (c.client_key_file.empty() && !opts.read_only) {
    error = std::string(kNoClientKeyError);
    return nullptr;
  }
  SipKey client_key;
  if (!c.client_key_file.empty() && !read_client_key_file(c.client_key_file, client_key, error))
    return nullptr;

  if (!c.metrics_listen.empty()) {
    try {
      s->exposer_ = std::make_unique<prometheus::Exposer>(c.metrics_listen);
    } catch (const std::exception& e) {
      error = "cannot listen for /metrics on '" + c.metrics_listen + "': " + e.what();
      if (status) *status = exit_status::kRuntime;
      return nullptr;
    }
    s->metrics_.export_capture(opts.capture_metrics);
    for (const auto& col : s->metrics_.collectables()) s->exposer_->RegisterCollectable(col);
    s->process_metrics_ = std::make_shared<ProcessMetrics>(opts.program);
    s->exposer_->RegisterCollectable(s->process_metrics_);
  }

  CoreOptions core_opts = opts.core;
  core_opts.prefix = c.prefix;
  core_opts.min_samples = c.min_samples;
  core_opts.min_clients = c.min_clients;
  core_opts.max_wc_cv = c.max_wc_cv;
  core_opts.report_rate_per_s = c.report_rate_per_s;
  core_opts.report_max_clients_per_prefix = c.report_max_clients;
  core_opts.max_cwnd_opt = c.max_cwnd_opt;
  core_opts.window_s = c.window_s;
  core_opts.clock_skew_s = c.clock_skew_s;
  s->read_pool_ = std::make_unique<StorePool>(store_opts, opts.read_connections);
  // A read-only replica hands Report nowhere: the core answers it UNIMPLEMENTED.
  s->core_ = std::make_unique<EstimatesCore>(*s->read_pool_, clock, core_opts,
                                             opts.read_only ? nullptr : s.get(), nullptr,
                                             s->read_pool_.get());
  s->hub_ = std::make_unique<WatchHub>(*s->core_, opts.watch_refresh_ms);
  s->service_ = std::make_unique<EstimatesService>(*s->core_, *s->hub_, &s->metrics_);

  // The replica reads the store's clock through this connection, read-only or not.
  s->write_store_ = std::make_unique<RedisStore>(store_opts);
  if (opts.read_only) {
    std::fprintf(stderr, "%s: read-only: no Report, nothing written to Redis\n",
                 opts.program.c_str());
    return s->start_grpc(error, status) ? std::move(s) : nullptr;
  }
  SampleWriterOptions writer_opts = writer_options_from(c);
  writer_opts.client_key = client_key;
  const std::string fingerprint = client_key_fingerprint_hex(client_key);
  s->write_store_->expect_client_key(fingerprint);
  std::fprintf(stderr, "%s: client id key: fingerprint %s (%s)\n", opts.program.c_str(),
               fingerprint.c_str(),
               c.client_key_file == kPublicKeyWord ? "the public key" : c.client_key_file.c_str());
  s->writer_ = std::make_unique<SampleWriter>(*s->write_store_, writer_opts);
  ServiceStack* self = s.get();
  s->writer_->set_flush_observer([self](double latency_s, bool) {
    self->metrics_.observe_flush(latency_s);
    self->hub_->request_refresh();  // Watch: the window just changed
  });
  return s->start_grpc(error, status) ? std::move(s) : nullptr;
}

bool ServiceStack::start_grpc(std::string& error, int* status) {
  const ControlOptions& c = opts_.control;
  if (c.grpc_listen.empty()) return true;
  GrpcSecurity sec;
  if (!read_grpc_security(c.grpc_tls_cert, c.grpc_tls_key, c.grpc_client_ca, c.report_token_file,
                          sec, error))
    return false;
  server_ = start_grpc_server(c.grpc_listen, *service_, grpc_port_, error, sec);
  if (!server_) {
    // The port was checked above (start_grpc_server: 0-65535): what is left is binding it.
    if (status && grpc_port_ == 0 && error.rfind("cannot listen", 0) == 0)
      *status = exit_status::kRuntime;
    return false;
  }
  return true;
}

ServiceStack::~ServiceStack() {
  shutdown();
  writer_.reset();  // stops the flush thread, whose observer uses the hub and the metrics
}

void ServiceStack::shutdown() {
  if (hub_) hub_->stop();  // ends Watch streams first, so Shutdown does not wait on them
  if (service_) service_->stop_health_watches();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    // Calls still waiting for Redis when the deadline passed (a stalled Redis) are answered
    // now, while the service's completion queues still run: after the service is gone a
    // reader completing one would touch freed memory.
    if (read_pool_) read_pool_->stop();
    // Completion queues shut down and drained while the server object exists, then the server
    // (destroying it first let a drained request touch freed server state).
    service_.reset();
    server_.reset();
  }
}

void ServiceStack::submit(const Sample& s) {
  std::lock_guard lock(report_mu_);
  if (reports_.size() < kMaxQueuedReports) reports_.push_back(s);
}

void ServiceStack::new_connection(const IpAddr& client) {
  hub_->notify_new_connection(prefix_of(client, opts_.control.prefix));
}

void ServiceStack::add_flow(const FlowRecord& r) {
  const HalfRecord& h = r.s2c;
  if (h.unique_bytes == 0) return;
  flow_totals_.merge(LossFigures{1, h.max_flight_segments < 4 ? 1u : 0u, h.loss_events_fast,
                                 h.loss_events_timeout});
  if (writer_) writer_->add_flow(r);
}

void ServiceStack::tick(uint64_t capture_now_ns) {
  {
    std::lock_guard lock(report_mu_);
    reports_.swap(reports_spare_);
  }
  for (const Sample& s : reports_spare_) {
    if (writer_) writer_->add(s);
    (s.kind == SampleKind::kWc ? agent_wc_ : agent_rtt_)++;
  }
  reports_spare_.clear();
  const auto now = std::chrono::steady_clock::now();
  if (writer_) writer_->tick(capture_now_ns, now);
  if (now - last_metrics_ >= kMetricsPeriod) {
    last_metrics_ = now;
    publish_writer_metrics();
    report_writer_trouble(now);
  }
}

// Redis failures are never silent: a line on stderr when flushes fail or updates are dropped,
// at most one per error_line_interval_ms (the counters are in /metrics).
void ServiceStack::report_writer_trouble(std::chrono::steady_clock::time_point now) {
  if (!writer_) return;  // read-only: nothing to write, nothing to lose
  const WriterStats w = writer_->stats();
  // A key mismatch is said even when no update waits (a replica without Report traffic).
  const uint64_t mismatches = write_store_->client_key_mismatches();
  if (w.flush_errors_total == reported_flush_errors_ &&
      w.backlog_dropped_total == reported_dropped_ && mismatches == reported_mismatches_)
    return;
  if (last_error_line_ != std::chrono::steady_clock::time_point{} &&
      now - last_error_line_ < std::chrono::milliseconds(opts_.error_line_interval_ms))
    return;
  last_error_line_ = now;
  std::fprintf(stderr,
               "%s: Redis: %" PRIu64 " failed flushes, %" PRIu64 " updates waiting, %" PRIu64
               " updates (%" PRIu64 " samples) dropped so far; last error: %s\n",
               opts_.program.c_str(), w.flush_errors_total - reported_flush_errors_,
               w.backlog_updates, w.backlog_dropped_total, w.samples_dropped_total,
               writer_->last_error().c_str());
  reported_flush_errors_ = w.flush_errors_total;
  reported_dropped_ = w.backlog_dropped_total;
  reported_mismatches_ = mismatches;
}

std::string ServiceStack::refuses_reports() const {
  if (!write_store_ || write_store_->client_key_state() != RedisStore::ClientKeyState::kMismatch)
    return {};
  return "this replica's client id key (--client-key-file) differs from the one the store's "
         "writers use: it writes nothing, so it takes no Report (docs/deploy.md, section 4)";
}

void ServiceStack::publish_writer_metrics() {
  const WriterStats w = writer_ ? writer_->stats() : WriterStats{};
  WriterTotals t;
  t.flush_errors = w.flush_errors_total;
  t.backlog_updates = w.backlog_updates;
  t.backlog_dropped = w.backlog_dropped_total;
  t.agent_samples_wc = agent_wc_;
  t.agent_samples_rtt = agent_rtt_;
  t.rejected_future = w.rejected_future;
  t.rejected_wc_bound = w.rejected_wc_bound;
  t.rejected_rtt_bound = w.rejected_rtt_bound;
  t.clock_clamped = write_store_->clock_clamped();
  t.clock_repaired = write_store_->clock_repaired();
  t.client_key_mismatches = write_store_->client_key_mismatches();
  t.client_key_mismatch = write_store_->client_key_state() == RedisStore::ClientKeyState::kMismatch;
  t.store_clock_ns = clock_->now_ns();
  static_assert(std::tuple_size_v<decltype(t.report_rejected)> == size_t(ReportReject::kCount));
  for (size_t i = 0; i < t.report_rejected.size(); ++i)
    t.report_rejected[i] = core_->report_rejected(static_cast<ReportReject>(i));
  t.wc_by_median = core_->wc_by_median();
  t.wc_by_mean = core_->wc_by_mean();
  t.wc_clients_left_out = core_->wc_clients_left_out();
  if (const std::shared_ptr<PrefixMapSource>& m = opts_.control.prefix.map) {
    t.prefix_map_uncovered = m->uncovered.load(std::memory_order_relaxed);
    t.prefix_map_prefixes = m->current.load(std::memory_order_acquire)->size();
  }
  metrics_.set_writer_totals(t);
  metrics_.set_flow_totals(flow_totals_);
}

bool ServiceStack::finish() {
  tick(0);
  if (!writer_) {  // read-only
    publish_writer_metrics();
    return true;
  }
  const bool flushed = writer_->finish(std::chrono::milliseconds(opts_.finish_wait_ms));
  publish_writer_metrics();
  const WriterStats w = writer_->stats();
  // A writer whose key differed from the other writers' ends with the status of lost samples
  // even when none waited: its own could not have been written.
  const bool mismatch = write_store_->client_key_state() == RedisStore::ClientKeyState::kMismatch;
  if (flushed && w.backlog_dropped_total == 0 && !mismatch) return true;
  if (mismatch && flushed && w.backlog_dropped_total == 0) {
    std::fprintf(stderr, "%s: Redis: %s\n", opts_.program.c_str(), writer_->last_error().c_str());
    return false;
  }
  std::fprintf(stderr,
               "%s: Redis: samples lost: %" PRIu64 " bucket updates (%" PRIu64
               " samples) not written at exit, %" PRIu64 " updates (%" PRIu64
               " samples) dropped from the full backlog; last error: %s\n",
               opts_.program.c_str(), w.backlog_updates, w.backlog_samples, w.backlog_dropped_total,
               w.samples_dropped_total, writer_->last_error().c_str());
  return false;
}

}  // namespace spand
