#include "core.hpp"

#include <chrono>
#include <cmath>

#include "address.hpp"
#include "estimates/estimate.hpp"
#include "spand.h"

namespace spand {

uint64_t SteadyClock::now_ns() const {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

EstimatesCore::EstimatesCore(EstimateStore& store, const Clock& clock, const CoreOptions& opts,
                             SampleSink* sink, const Clock* cache_clock)
    : store_(store),
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
      return {grpc::StatusCode::UNAVAILABLE, "estimate store: " + error};
    }
    cache_.put(p, steady_ns, acc);
  }
  fill(p, acc, out);
  return grpc::Status::OK;
}

void EstimatesCore::fill(const Prefix& p, const Accumulator& acc, v1::Estimate& out) const {
  // The verdict and the statistics are the estimates component's (shared with --prefix-summary).
  const Estimate e = compute_estimate(acc, clock_.now_ns(), opts_.min_samples, opts_.decay);
  out.set_prefix(p.to_string());
  out.set_samples(e.samples);
  out.set_wc_segments(e.wc_segments);
  out.set_wc_stddev(e.wc_stddev);
  out.set_rtt_samples(e.rtt_samples);
  out.set_rtt_ms(e.rtt_ms);
  out.set_min_rtt_ms(e.min_rtt_ms);
  out.set_age_s(e.age_s);
  out.set_verdict(e.verdict == Verdict::kUseEstimate ? v1::USE_ESTIMATE : v1::SLOW_START);
}

grpc::Status EstimatesCore::add_cwnd(const v1::GetRequest& req, const std::string& where,
                                     v1::Estimate& out) const {
  const uint32_t mss = req.has_mss() ? req.mss() : opts_.default_mss_bytes;
  const uint32_t b = req.has_acked_per_ack() ? req.acked_per_ack() : opts_.default_acked_per_ack;
  if (mss == 0) return {grpc::StatusCode::INVALID_ARGUMENT, where + "mss must be > 0"};
  if (b == 0) return {grpc::StatusCode::INVALID_ARGUMENT, where + "acked_per_ack must be > 0"};
  uint32_t cwnd = 0;
  if (out.verdict() == v1::USE_ESTIMATE) {
    // W_c is a mean; the integer window below it keeps cwnd_opt <= the measured mean.
    const double wc_floor = std::floor(out.wc_segments());
    const uint32_t wc =
        wc_floor >= double(SPAND_WC_MAX_SEGMENTS) ? SPAND_WC_MAX_SEGMENTS : uint32_t(wc_floor);
    spand_cwnd_result r{};
    const uint64_t segments = spand_segments_for_bytes(req.transfer_bytes(), mss);
    const int rc = spand_cwnd_opt(wc, segments, b, SPAND_LOSS_FREE, 1, &r);
    if (rc == SPAND_OK) {
      cwnd = r.cwnd_opt;
    } else if (rc != SPAND_EINVAL || wc != 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT, where + "cwnd_opt: " + spand_strerror(rc)};
    }
  }
  out.set_cwnd_opt(cwnd);
  out.set_pacing_rate_bps(
      out.rtt_samples() ? spand_pacing_rate_bps(cwnd, mss, out.rtt_ms() * 1000.0) : 0);
  return grpc::Status::OK;
}

grpc::Status EstimatesCore::get_one(const v1::GetRequest& req, v1::Estimate& out,
                                    const std::string& where) {
  Prefix p;
  std::string error;
  if (!parse_target(req.address(), opts_.prefix, p, error)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, where + error};
  }
  if (grpc::Status st = estimate_prefix(p, true, out); !st.ok()) return st;
  (out.verdict() == v1::USE_ESTIMATE ? use_estimate_ : slow_start_)
      .fetch_add(1, std::memory_order_relaxed);
  if (req.has_transfer_bytes()) return add_cwnd(req, where, out);
  return grpc::Status::OK;
}

grpc::Status EstimatesCore::get(const v1::GetRequest& req, v1::Estimate& out) {
  return get_one(req, out, "");
}

grpc::Status EstimatesCore::batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& out) {
  if (size_t(req.requests_size()) > kMaxBatch) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "batch of " + std::to_string(req.requests_size()) +
                                                    " requests exceeds the limit of " +
                                                    std::to_string(kMaxBatch)};
  }
  // Validate every address before any store round trip, so a bad batch costs nothing.
  for (int i = 0; i < req.requests_size(); ++i) {
    Prefix p;
    std::string error;
    if (!parse_target(req.requests(i).address(), opts_.prefix, p, error)) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "requests[" + std::to_string(i) + "]: " + error};
    }
  }
  out.mutable_estimates()->Reserve(req.requests_size());
  for (int i = 0; i < req.requests_size(); ++i) {
    grpc::Status st =
        get_one(req.requests(i), *out.add_estimates(), "requests[" + std::to_string(i) + "]: ");
    if (!st.ok()) {
      out.clear_estimates();
      return st;
    }
  }
  return grpc::Status::OK;
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
    return {grpc::StatusCode::UNAVAILABLE, "estimate store: " + error};
  }
  for (const PrefixActivity& row : rows) {
    v1::TopEntry* e = out.add_prefixes();
    e->set_prefix(row.prefix.to_string());
    e->set_samples(row.samples);
  }
  return grpc::Status::OK;
}

bool EstimatesCore::report(const v1::ReportSample& msg, v1::ReportSummary& summary) {
  auto reject = [&](const std::string& why) {
    summary.set_rejected(summary.rejected() + 1);
    if (summary.first_error().empty()) summary.set_first_error(why);
    return false;
  };
  if (!sink_) return reject("this server does not accept reports");
  IpAddr client;
  std::string error;
  if (!parse_client_address(msg.client_address(), opts_.prefix, client, error)) {
    return reject("client_address: " + error);
  }
  if (msg.wc_segments() == 0 && msg.rtt_us() == 0) {
    return reject("neither wc_segments nor rtt_us is set");
  }
  Sample s;
  s.ts_ns = msg.timestamp_ns() ? msg.timestamp_ns() : clock_.now_ns();
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
