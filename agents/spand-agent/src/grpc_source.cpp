#include "grpc_source.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "client_channel.hpp"
#include "spand.h"
#include "spand/v1/estimates.grpc.pb.h"

namespace spand::agent {

namespace {

constexpr size_t kMaxWatchPrefixes = SPAND_MAX_WATCH_PREFIXES;  // the service's limit

std::optional<Estimate> from_proto(const spand::v1::Estimate& e) {
  auto p = Prefix::parse(e.prefix());
  if (!p) return std::nullopt;
  Estimate est;
  est.prefix = *p;
  est.samples = e.samples();
  est.wc_segments = e.wc_segments();
  est.rtt_ms = e.rtt_ms();
  est.min_rtt_ms = e.min_rtt_ms();
  est.age_s = e.age_s();
  est.verdict = e.verdict() == spand::v1::USE_ESTIMATE ? Verdict::kUseEstimate
                : e.verdict() == spand::v1::SLOW_START ? Verdict::kSlowStart
                                                       : Verdict::kUnspecified;
  return est;
}

}  // namespace

GrpcEstimateSource::GrpcEstimateSource(std::shared_ptr<grpc::Channel> channel, uint32_t deadline_ms,
                                       std::string report_token)
    : channel_(std::move(channel)),
      deadline_ms_(deadline_ms),
      report_token_(std::move(report_token)) {
  thread_ = std::thread([this] { watch_loop(); });
}

void GrpcEstimateSource::log_failure(const char* call, const grpc::Status& st) {
  // The first failure, then at most one line every 10 s with the count since (a service down or
  // a TLS handshake refused: never silent, never a flood).
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(log_mu_);
  ++failures_unlogged_;
  if (logged_once_ && now - last_log_ < std::chrono::seconds(10)) return;
  std::fprintf(stderr,
               "spand-agent: %s to the estimate service failed (%" PRIu64
               " failures since the last line): code %d: %s\n",
               call, failures_unlogged_, int(st.error_code()), st.error_message().c_str());
  logged_once_ = true;
  last_log_ = now;
  failures_unlogged_ = 0;
}

GrpcEstimateSource::~GrpcEstimateSource() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    if (watch_ctx_) watch_ctx_->TryCancel();
  }
  cv_.notify_all();
  thread_.join();
}

FetchResult GrpcEstimateSource::get(const Prefix& prefix) {
  auto stub = spand::v1::Estimates::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms_));
  spand::v1::GetRequest req;
  req.set_address(prefix.str());
  spand::v1::Estimate resp;
  grpc::Status st = stub->Get(&ctx, req, &resp);
  if (!st.ok()) {
    ++errors_;
    log_failure("Get", st);
    return {FetchStatus::kUnavailable, std::nullopt};
  }
  auto est = from_proto(resp);
  if (!est) {
    ++errors_;
    return {FetchStatus::kUnavailable, std::nullopt};
  }
  // The service answers for the prefix length it is configured with; key by what we asked.
  est->prefix = prefix;
  if (resp.samples() == 0 && resp.verdict() != spand::v1::USE_ESTIMATE)
    return {FetchStatus::kNotFound, std::nullopt};
  return {FetchStatus::kOk, est};
}

void GrpcEstimateSource::watch(const std::vector<Prefix>& prefixes) {
  std::lock_guard<std::mutex> lk(mu_);
  watch_prefixes_ = prefixes;
  if (watch_prefixes_.size() > kMaxWatchPrefixes) watch_prefixes_.resize(kMaxWatchPrefixes);
  ++watch_generation_;
  if (watch_ctx_) watch_ctx_->TryCancel();
  cv_.notify_all();
}

std::vector<Estimate> GrpcEstimateSource::take_updates() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Estimate> out;
  out.swap(pending_);
  return out;
}

void GrpcEstimateSource::watch_loop() {
  auto stub = spand::v1::Estimates::NewStub(channel_);
  double backoff_s = 0;
  for (;;) {
    spand::v1::WatchRequest req;
    uint64_t generation;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !watch_prefixes_.empty(); });
      if (stop_) return;
      for (const Prefix& p : watch_prefixes_) req.add_prefixes(p.str());
      generation = watch_generation_;
    }
    req.set_initial(true);
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
      watch_ctx_ = &ctx;
    }
    auto reader = stub->Watch(&ctx, req);
    spand::v1::WatchEvent ev;
    bool got_any = false;
    while (reader->Read(&ev)) {
      got_any = true;
      if (auto est = from_proto(ev.estimate())) {
        std::lock_guard<std::mutex> lk(mu_);
        pending_.push_back(*est);
      }
    }
    grpc::Status st = reader->Finish();
    bool restarted;
    {
      std::lock_guard<std::mutex> lk(mu_);
      watch_ctx_ = nullptr;
      if (stop_) return;
      restarted = generation != watch_generation_;
    }
    if (restarted) {
      backoff_s = 0;
      continue;
    }
    ++errors_;
    backoff_s = got_any ? 0.5 : std::clamp(backoff_s * 2, 0.5, 30.0);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::duration<double>(backoff_s),
                 [&] { return stop_ || generation != watch_generation_; });
    if (stop_) return;
    (void)st;
  }
}

bool GrpcEstimateSource::report(const std::vector<ReportItem>& items) {
  if (items.empty()) return true;
  auto stub = spand::v1::Estimates::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms_ * 5));
  add_report_token(ctx, report_token_);
  spand::v1::ReportSummary summary;
  auto writer = stub->Report(&ctx, &summary);
  for (const auto& it : items) {
    spand::v1::ReportSample s;
    s.set_client_address(it.client_address);
    s.set_wc_segments(it.wc_segments);
    s.set_rtt_us(it.rtt_us);
    s.set_source(it.source);
    if (!writer->Write(s)) break;
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) {
    ++errors_;
    log_failure("Report", st);
  }
  return st.ok();
}

}  // namespace spand::agent
