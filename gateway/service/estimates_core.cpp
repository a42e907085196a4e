#include "service/estimates_core.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "estimates/estimate.hpp"
#include "service/address.hpp"
#include "spand.h"

namespace spand {

uint64_t SteadyClock::now_ns() const {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// The store's own error names the Redis node (host:port) and its state: kept out of what clients
// see (the gateway's stderr and metrics carry Redis trouble).
static grpc::Status store_unavailable() {
  return {grpc::StatusCode::UNAVAILABLE, "estimate store unavailable; retry later"};
}

EstimatesCore::EstimatesCore(EstimateStore& store, const Clock& clock, const CoreOptions& opts,
                             SampleSink* sink, const Clock* cache_clock, AsyncWindowReader* reader)
    : store_(store),
      reader_(reader),
      clock_(clock),
      opts_(opts),
      sink_(sink),
      cache_clock_(cache_clock ? *cache_clock : steady_),
      cache_(opts.cache_ttl_ms * 1'000'000, opts.cache_max_entries) {}

grpc::Status EstimatesCore::estimate_prefix(const Prefix& p, bool use_cache, v1::Estimate& out) {
  Accumulator acc;
  const uint64_t steady_ns = cache_.enabled() ? cache_clock_.now_ns() : 0;
  if (use_cache && cache_.find(p, steady_ns, acc)) {
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::string error;
    if (!store_.read_window(p, clock_.now_ns(), acc, error)) {
      return store_unavailable();
    }
    cache_.put(p, steady_ns, acc);
  }
  fill(p, acc, out);
  return grpc::Status::OK;
}

void EstimatesCore::fill(const Prefix& p, const Accumulator& acc, v1::Estimate& out) const {
  // The verdict and the statistics are the estimates component's (shared with --prefix-summary).
  const Estimate e = compute_estimate(acc, clock_.now_ns(), opts_.min_samples, opts_.decay,
                                      opts_.min_clients, opts_.max_wc_cv);
  out.set_prefix(p.to_string());
  out.set_samples(e.samples);
  out.set_wc_segments(e.wc_segments);
  out.set_wc_stddev(e.wc_stddev);
  out.set_rtt_samples(e.rtt_samples);
  out.set_rtt_ms(e.rtt_ms);
  out.set_min_rtt_ms(e.min_rtt_ms);
  out.set_age_s(e.age_s);
  out.set_verdict(e.verdict == Verdict::kUseEstimate ? v1::USE_ESTIMATE : v1::SLOW_START);
  if (e.loss.flows > 0) {
    out.set_flows(e.loss.flows);
    out.set_never4_pct(e.never4_pct());
    out.set_loss_events_fast(e.loss.fast);
    out.set_loss_events_timeout(e.loss.timeout);
    if (e.loss.fast + e.loss.timeout > 0) out.set_timeout_pct(e.timeout_pct());
  }
}

grpc::Status EstimatesCore::add_cwnd(const v1::GetRequest& req, const std::string& where,
                                     v1::Estimate& out) const {
  const uint32_t mss = req.has_mss() ? req.mss() : opts_.default_mss_bytes;
  const uint32_t b = req.has_acked_per_ack() ? req.acked_per_ack() : opts_.default_acked_per_ack;
  if (mss == 0) return {grpc::StatusCode::INVALID_ARGUMENT, where + "mss must be > 0"};
  if (b == 0) return {grpc::StatusCode::INVALID_ARGUMENT, where + "acked_per_ack must be > 0"};
  uint32_t cwnd = 0;
  if (out.verdict() == v1::USE_ESTIMATE) {
    // W_c is a mean (of a client, or of the samples); the integer window below it keeps
    // cwnd_opt <= the measured value.
    const double wc_floor = std::floor(out.wc_segments());
    const uint32_t wc =
        wc_floor >= double(SPAND_WC_MAX_SEGMENTS) ? SPAND_WC_MAX_SEGMENTS : uint32_t(wc_floor);
    spand_cwnd_result r{};
    const uint64_t segments = spand_segments_for_bytes(req.transfer_bytes(), mss);
    const int rc = spand_cwnd_opt(wc, segments, b, SPAND_LOSS_FREE, 1, &r);
    if (rc == SPAND_OK) {
      cwnd = r.cwnd_opt;
      if (opts_.max_cwnd_opt && cwnd > opts_.max_cwnd_opt) cwnd = opts_.max_cwnd_opt;
    } else if (rc != SPAND_EINVAL || wc != 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT, where + "cwnd_opt: " + spand_strerror(rc)};
    }
  }
  out.set_cwnd_opt(cwnd);
  out.set_pacing_rate_bps(
      out.rtt_samples() ? spand_pacing_rate_bps(cwnd, mss, out.rtt_ms() * 1000.0) : 0);
  return grpc::Status::OK;
}

grpc::Status EstimatesCore::answer(const v1::GetRequest& req, const Prefix& p,
                                   const Accumulator& acc, const std::string& where,
                                   v1::Estimate& out) {
  fill(p, acc, out);
  (out.verdict() == v1::USE_ESTIMATE ? use_estimate_ : slow_start_)
      .fetch_add(1, std::memory_order_relaxed);
  if (acc.wc_count)
    (acc.has_wc_client_median() ? wc_by_median_ : wc_by_mean_)
        .fetch_add(1, std::memory_order_relaxed);
  if (acc.wc_client_overflow) wc_left_out_.fetch_add(1, std::memory_order_relaxed);
  if (req.has_transfer_bytes()) return add_cwnd(req, where, out);
  return grpc::Status::OK;
}

void EstimatesCore::read(WindowReadOp* const* ops, size_t n) {
  if (n == 0) return;
  if (reader_) {
    reader_->read_async(ops, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    ops[i]->ok = store_.read_window(ops[i]->prefix, ops[i]->now_ns, ops[i]->acc, ops[i]->error);
    ops[i]->complete();
  }
}

void EstimatesCore::start_get(const v1::GetRequest& req, v1::Estimate& reply, GetCall& call) {
  WindowReadOp& op = call;
  std::string error;
  if (!parse_target(req.address(), opts_.prefix, op.prefix, error)) {
    call.finish({grpc::StatusCode::INVALID_ARGUMENT, error});
    return;
  }
  call.core_ = this;
  call.req_ = &req;
  call.reply_ = &reply;
  call.steady_ns_ = cache_.enabled() ? cache_clock_.now_ns() : 0;
  if (cache_.find(op.prefix, call.steady_ns_, op.acc)) {
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
    call.finish(answer(req, op.prefix, op.acc, {}, reply));
    return;
  }
  op.now_ns = clock_.now_ns();
  WindowReadOp* ops[1] = {&op};
  read(ops, 1);
}

void GetCall::complete() {
  core_->get_read_done(*this);
}

void EstimatesCore::get_read_done(GetCall& call) {
  WindowReadOp& op = call;
  if (!op.ok) {
    call.finish(store_unavailable());
    return;
  }
  cache_.put(op.prefix, call.steady_ns_, op.acc);
  call.finish(answer(*call.req_, op.prefix, op.acc, {}, *call.reply_));
}

void EstimatesCore::start_batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& reply,
                                    BatchGetCall& call) {
  const size_t n = size_t(req.requests_size());
  if (n > kMaxBatch) {
    call.finish({grpc::StatusCode::INVALID_ARGUMENT, "batch of " + std::to_string(n) +
                                                         " requests exceeds the limit of " +
                                                         std::to_string(kMaxBatch)});
    return;
  }
  // Validate every address before any store round trip, so a bad batch costs nothing.
  call.items_ = std::make_unique<BatchGetCall::Item[]>(n);
  for (size_t i = 0; i < n; ++i) {
    std::string error;
    if (!parse_target(req.requests(int(i)).address(), opts_.prefix, call.items_[i].prefix, error)) {
      call.items_.reset();
      call.finish(
          {grpc::StatusCode::INVALID_ARGUMENT, "requests[" + std::to_string(i) + "]: " + error});
      return;
    }
  }
  call.core_ = this;
  call.req_ = &req;
  call.reply_ = &reply;
  call.steady_ns_ = cache_.enabled() ? cache_clock_.now_ns() : 0;
  const uint64_t now_ns = clock_.now_ns();
  std::vector<WindowReadOp*> misses;
  for (size_t i = 0; i < n; ++i) {
    BatchGetCall::Item& it = call.items_[i];
    it.batch = &call;
    if (cache_.find(it.prefix, call.steady_ns_, it.acc)) {
      cache_hits_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    it.from_store = true;
    it.now_ns = now_ns;
    misses.push_back(&it);
  }
  // One extra count held until every read is queued: the last of the reads and this thread
  // may race to finish, and only the one reaching zero builds the reply.
  call.pending_.store(misses.size() + 1, std::memory_order_relaxed);
  read(misses.data(), misses.size());
  if (call.pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) batch_read_done(call);
}

void BatchGetCall::Item::complete() {
  if (batch->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    batch->core_->batch_read_done(*batch);
  }
}

void EstimatesCore::batch_read_done(BatchGetCall& call) {
  const v1::BatchGetRequest& req = *call.req_;
  v1::BatchGetResponse& out = *call.reply_;
  const size_t n = size_t(req.requests_size());
  for (size_t i = 0; i < n; ++i) {
    const BatchGetCall::Item& it = call.items_[i];
    if (it.from_store && !it.ok) {
      const grpc::Status st = store_unavailable();
      call.items_.reset();  // `it` is gone from here on
      call.finish(st);
      return;
    }
  }
  out.mutable_estimates()->Reserve(int(n));
  for (size_t i = 0; i < n; ++i) {
    const BatchGetCall::Item& it = call.items_[i];
    if (it.from_store) cache_.put(it.prefix, call.steady_ns_, it.acc);
    grpc::Status st = answer(req.requests(int(i)), it.prefix, it.acc,
                             "requests[" + std::to_string(i) + "]: ", *out.add_estimates());
    if (!st.ok()) {
      out.clear_estimates();
      call.items_.reset();
      call.finish(st);
      return;
    }
  }
  call.items_.reset();
  call.finish(grpc::Status::OK);
}

namespace {
// Waits for an asynchronous call's finish() (get/batch_get for tests and tools).
template <typename Base>
class Waiting final : public Base {
 public:
  void finish(const grpc::Status& st) override {
    std::lock_guard lock(mu_);
    st_ = st;
    done_ = true;
    cv_.notify_one();
  }
  grpc::Status wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return st_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status st_;
};
}  // namespace

grpc::Status EstimatesCore::get(const v1::GetRequest& req, v1::Estimate& out) {
  Waiting<GetCall> call;
  start_get(req, out, call);
  return call.wait();
}

grpc::Status EstimatesCore::batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& out) {
  Waiting<BatchGetCall> call;
  start_batch_get(req, out, call);
  return call.wait();
}

grpc::Status EstimatesCore::top(const v1::TopRequest& req, v1::TopResponse& out) {
  const uint32_t limit = req.limit() ? req.limit() : kDefaultTop;
  if (limit > kMaxTop) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "limit " + std::to_string(limit) + " exceeds " + std::to_string(kMaxTop)};
  }
  std::vector<PrefixActivity> rows;
  std::string error;
  if (!store_.top_prefixes(clock_.now_ns(), limit, rows, error)) {
    return store_unavailable();
  }
  for (const PrefixActivity& row : rows) {
    v1::TopEntry* e = out.add_prefixes();
    e->set_prefix(row.prefix.to_string());
    e->set_samples(row.samples);
  }
  return grpc::Status::OK;
}

const char* report_reject_name(ReportReject r) {
  switch (r) {
    case ReportReject::kBadAddress:
      return "bad_client";
    case ReportReject::kNoValue:
      return "no_value";
    case ReportReject::kNoClock:
      return "no_clock";
    case ReportReject::kFuture:
      return "future";
    case ReportReject::kTooOld:
      return "too_old";
    case ReportReject::kWcBound:
      return "wc_bound";
    case ReportReject::kRttBound:
      return "rtt_bound";
    case ReportReject::kRateLimited:
      return "rate_limited";
    case ReportReject::kTooManyClients:
      return "too_many_clients";
    case ReportReject::kCount:
      break;
  }
  return "?";
}

bool EstimatesCore::take_report_token(const std::string& caller) {
  if (caller.empty() || opts_.report_rate_per_s == 0) return true;
  const uint64_t now = cache_clock_.now_ns();  // monotonic (a fake one in tests)
  const double rate = opts_.report_rate_per_s, burst = 2.0 * rate;
  std::lock_guard lock(rate_mu_);
  if (rate_.size() >= kMaxReportCallers && !rate_.count(caller)) rate_.clear();
  auto [it, fresh] = rate_.try_emplace(caller, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst, b.tokens + double(now - b.last_ns) * rate / 1e9);
    b.last_ns = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

bool EstimatesCore::admit_client(const std::string& caller, const IpAddr& client, uint64_t now_ns) {
  const uint32_t cap = opts_.report_max_clients_per_prefix;
  if (caller.empty() || cap == 0) return true;
  const uint64_t period = now_ns / (uint64_t(std::max(opts_.window_s, 1u)) * 1'000'000'000ULL);
  const Prefix p = prefix_of(client, opts_.prefix);
  std::lock_guard lock(clients_mu_);
  if (caller_clients_.size() >= kMaxReportCallers && !caller_clients_.count(caller))
    caller_clients_.clear();
  CallerClients& c = caller_clients_[caller];
  if (c.period != period) {  // a new window: every caller starts over
    c.period = period;
    c.by_prefix.clear();
  }
  auto it = c.by_prefix.find(p);
  if (it == c.by_prefix.end()) {
    if (c.by_prefix.size() >= kMaxReportPrefixesPerCaller) return false;
    it = c.by_prefix.emplace(p, std::vector<IpAddr>{}).first;
  }
  std::vector<IpAddr>& seen = it->second;
  if (std::find(seen.begin(), seen.end(), client) != seen.end()) return true;
  if (seen.size() >= cap) return false;
  seen.push_back(client);
  return true;
}

bool EstimatesCore::report(const v1::ReportSample& msg, v1::ReportSummary& summary,
                           const std::string& caller) {
  auto reject = [&](const std::string& why) {
    summary.set_rejected(summary.rejected() + 1);
    if (summary.first_error().empty()) summary.set_first_error(why);
    return false;
  };
  auto reject_as = [&](ReportReject r, const std::string& why) {
    report_rejected_[size_t(r)].fetch_add(1, std::memory_order_relaxed);
    return reject(why);
  };
  if (!sink_) return reject("this server does not accept reports");
  if (!take_report_token(caller)) {
    return reject_as(ReportReject::kRateLimited,
                     "more than " + std::to_string(opts_.report_rate_per_s) +
                         " Report messages per second from this client");
  }
  IpAddr client;
  std::string error;
  if (!parse_client_address(msg.client_address(), opts_.prefix, client, error)) {
    return reject_as(ReportReject::kBadAddress, "client_address: " + error);
  }
  if (msg.wc_segments() == 0 && msg.rtt_us() == 0) {
    return reject_as(ReportReject::kNoValue, "neither wc_segments nor rtt_us is set");
  }
  // Time sanity: a sample may not move anything beyond the service clock + skew, nor land in a
  // bucket the window has already left.
  const uint64_t now = clock_.now_ns();
  if (now == 0) return reject_as(ReportReject::kNoClock, "the service clock is not set yet");
  const uint64_t ts = msg.timestamp_ns() ? msg.timestamp_ns() : now;
  if (ts > now && ts - now > uint64_t(opts_.clock_skew_s) * 1'000'000'000ULL) {
    return reject_as(ReportReject::kFuture, "timestamp_ns is more than " +
                                                std::to_string(opts_.clock_skew_s) +
                                                " s ahead of the service clock");
  }
  if (ts < now && now - ts > uint64_t(opts_.window_s) * 1'000'000'000ULL) {
    return reject_as(ReportReject::kTooOld, "timestamp_ns is older than the window");
  }
  if (msg.wc_segments() > opts_.max_wc_segments) {
    return reject_as(ReportReject::kWcBound,
                     "wc_segments above " + std::to_string(opts_.max_wc_segments));
  }
  if (msg.rtt_us() > opts_.max_rtt_us) {
    return reject_as(ReportReject::kRttBound, "rtt_us above " + std::to_string(opts_.max_rtt_us));
  }
  if (!admit_client(caller, client, now)) {
    return reject_as(ReportReject::kTooManyClients,
                     "this caller already reported " +
                         std::to_string(opts_.report_max_clients_per_prefix) +
                         " other client addresses of this prefix in this window");
  }
  Sample s;
  s.ts_ns = ts;
  s.client = client;
  s.origin = SampleOrigin::kAgent;
  if (msg.wc_segments()) {
    s.kind = SampleKind::kWc;
    s.wc_reason = WcReason::kNone;
    s.value = msg.wc_segments();
    sink_->submit(s);
    summary.set_accepted(summary.accepted() + 1);
  }
  if (msg.rtt_us()) {
    s.kind = SampleKind::kRtt;
    s.rtt_source = RttSource::kNone;
    s.value = msg.rtt_us();
    sink_->submit(s);
    summary.set_accepted(summary.accepted() + 1);
  }
  return true;
}

}  // namespace spand
