// The estimate service's logic, free of gRPC transport: parses requests, reads the window from
// the store (one round trip, or the short cache), computes the estimate and, when asked, the
// initial window (libspand). The gRPC handlers in service.cpp are thin shells over this class,
// so unit tests drive it with a fake store and a fake clock.
//
// Get and BatchGet are asynchronous: start_get/start_batch_get return at once and the answer
// comes through a callback, on the caller's thread when no store read is needed (bad request,
// cache hit, synchronous store) or else on the store's reader thread. No thread waits on Redis
// for a request, and no lock is held across a store read.
#pragma once

#include <grpcpp/support/status.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/prefix.hpp"
#include "dataplane/sample.hpp"
#include "estimates/estimate.hpp"
#include "estimates/estimates_options.hpp"
#include "estimates/store.hpp"
#include "service/estimate_cache.hpp"
#include "spand.h"
#include "spand/v1/estimates.pb.h"

namespace spand {

inline constexpr uint32_t kDefaultMaxCwndOpt = 512;

struct CoreOptions {
  PrefixConfig prefix;
  uint32_t min_samples = kDefaultMinSamples;  // fewer W_c samples in the window: SLOW_START
  uint32_t min_clients = kDefaultMinClients;  // fewer distinct W_c clients: SLOW_START
  double max_wc_cv = kDefaultMaxWcCv;         // outlier rule (estimate.hpp); 0 = off
  // cwnd_opt never above this many segments, whatever the window says (issue 12: a forged
  // window gave 685); 0 = no cap.
  uint32_t max_cwnd_opt = kDefaultMaxCwndOpt;
  DecayOptions decay;  // off by default (estimates/estimate.hpp)
  uint32_t default_mss_bytes = 1460;
  uint32_t default_acked_per_ack = 1;  // b; 2 for receivers with delayed ACKs
  uint64_t cache_ttl_ms = 1000;        // 0 disables the cache
  size_t cache_max_entries = 100'000;
  // Report admission (docs/api.md, "Report"): timestamps outside [clock - window_s, clock +
  // clock_skew_s] of the service clock and values beyond the bounds are rejected and counted.
  uint32_t window_s = 300;
  uint32_t clock_skew_s = kDefaultClockSkewS;
  uint32_t max_wc_segments = kMaxWcSegments;
  uint32_t max_rtt_us = kMaxRttUs;
  // Per-client limit on Report messages (token bucket keyed by the caller: its address, or its
  // certificate's identity with mutual TLS): this many per second, bursts of twice that. 0 = off.
  uint32_t report_rate_per_s = 1000;
  // Distinct client addresses one Report caller may add to one prefix per window (window_s
  // periods of the service clock); samples for more are rejected as too_many_clients. A Report
  // names its own client addresses, so without a cap one caller could give a prefix as many
  // "clients" as the W_c median needs to be outvoted (estimates/README.md, "Client ids").
  // 0 = no cap.
  uint32_t report_max_clients_per_prefix = 8;
};

// Why a Report message was rejected (spand_report_rejected_total{reason}).
enum class ReportReject : uint8_t {
  kBadAddress,
  kNoValue,
  kNoClock,
  kFuture,
  kTooOld,
  kWcBound,
  kRttBound,
  kRateLimited,
  kTooManyClients,
  kCount
};
const char* report_reject_name(ReportReject r);

// Limits, part of the API contract (proto comments, README, "Estimate service (`spand.v1`)").
inline constexpr size_t kMaxBatch = 1000;
inline constexpr size_t kMaxWatchPrefixes = SPAND_MAX_WATCH_PREFIXES;
inline constexpr uint32_t kMaxTop = 1000;
inline constexpr uint32_t kDefaultTop = 10;

// Where Report's agent samples go: the same writer the gateway's own samples take, so they
// enter the same window. Called from gRPC threads; implementations must be thread-safe.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void submit(const Sample& s) = 0;
  // Non-empty while the sink cannot write what it would be given (a writer whose client id key
  // differs from the store's): Report calls are then refused with that reason instead of being
  // answered OK for samples that would wait and be lost.
  virtual std::string refuses_reports() const { return {}; }
};

// One window read handed to an AsyncWindowReader: the reader fills acc, ok and error, then calls
// complete() exactly once, from its own thread. The owner keeps the op alive until then.
class WindowReadOp : public WindowRead {
 public:
  virtual void complete() = 0;

 protected:
  ~WindowReadOp() = default;
};

// A store that answers window reads without blocking the caller (StorePool in stack.hpp: reads
// are queued, pipelined to Redis by reader threads and completed from there).
class AsyncWindowReader {
 public:
  virtual ~AsyncWindowReader() = default;
  // Queues `n` reads; returns without waiting for Redis.
  virtual void read_async(WindowReadOp* const* ops, size_t n) = 0;
};

class EstimatesCore;

// One Get in flight. start_get fills `reply` and then calls finish() exactly once; after
// finish() the core never touches the call again (it may delete itself there).
class GetCall : private WindowReadOp {
 public:
  virtual ~GetCall() = default;
  virtual void finish(const grpc::Status& st) = 0;

 private:
  friend class EstimatesCore;
  void complete() override;
  EstimatesCore* core_ = nullptr;
  const v1::GetRequest* req_ = nullptr;
  v1::Estimate* reply_ = nullptr;
  uint64_t steady_ns_ = 0;  // cache time of the read
};

// One BatchGet in flight: the misses of the cache are read in one go (pipelined), the reply is
// built in request order when the last read is back, then finish() is called exactly once.
class BatchGetCall {
 public:
  virtual ~BatchGetCall() = default;
  virtual void finish(const grpc::Status& st) = 0;

 private:
  friend class EstimatesCore;
  struct Item final : WindowReadOp {
    BatchGetCall* batch = nullptr;
    bool from_store = false;  // false: acc came from the cache
    void complete() override;
  };
  EstimatesCore* core_ = nullptr;
  const v1::BatchGetRequest* req_ = nullptr;
  v1::BatchGetResponse* reply_ = nullptr;
  uint64_t steady_ns_ = 0;
  std::unique_ptr<Item[]> items_;
  std::atomic<size_t> pending_{0};
};

// Monotonic time for the cache's TTL (not the estimate clock, which is capture time).
class SteadyClock final : public Clock {
 public:
  uint64_t now_ns() const override;
};

class EstimatesCore {
 public:
  // `store` must be safe to call from several threads (see StorePool in stack.hpp); `sink` may
  // be null (Report then answers UNIMPLEMENTED). Without `reader`, Get and BatchGet read the
  // store synchronously on the caller's thread (tests with a fake store).
  EstimatesCore(EstimateStore& store, const Clock& clock, const CoreOptions& opts,
                SampleSink* sink = nullptr, const Clock* cache_clock = nullptr,
                AsyncWindowReader* reader = nullptr);

  // `req` and `reply` must outlive the call (until its finish()).
  void start_get(const v1::GetRequest& req, v1::Estimate& reply, GetCall& call);
  void start_batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& reply,
                       BatchGetCall& call);
  // The same, waiting for the answer (tests, tools).
  grpc::Status get(const v1::GetRequest& req, v1::Estimate& out);
  grpc::Status batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& out);
  grpc::Status top(const v1::TopRequest& req, v1::TopResponse& out);
  // One streamed Report message: true if accepted (samples handed to the sink), else false
  // with `error` set. Counts in `summary`.
  // `caller` keys the per-client rate limit ("" = no limit: in-process callers and tests).
  bool report(const v1::ReportSample& msg, v1::ReportSummary& summary,
              const std::string& caller = "");
  bool can_report() const { return sink_ != nullptr; }
  std::string report_refused() const { return sink_ ? sink_->refuses_reports() : std::string(); }

  // The estimate of an already-parsed prefix; `use_cache` false for Watch, which must see the
  // store's latest state. UNAVAILABLE when the store fails.
  grpc::Status estimate_prefix(const Prefix& p, bool use_cache, v1::Estimate& out);

  const CoreOptions& options() const { return opts_; }
  // Verdict counts, for spand_estimates_total{verdict}.
  uint64_t use_estimate_count() const { return use_estimate_.load(std::memory_order_relaxed); }
  uint64_t slow_start_count() const { return slow_start_.load(std::memory_order_relaxed); }
  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  // How answers with W_c samples got their W_c (spand_estimates_wc_total{method}): the median of
  // per-client means, or the mean (some bucket of the window without a client table); and the
  // answers whose window had more clients than the table keeps (their samples not in the median).
  uint64_t wc_by_median() const { return wc_by_median_.load(std::memory_order_relaxed); }
  uint64_t wc_by_mean() const { return wc_by_mean_.load(std::memory_order_relaxed); }
  uint64_t wc_clients_left_out() const { return wc_left_out_.load(std::memory_order_relaxed); }
  uint64_t report_rejected(ReportReject r) const {
    return report_rejected_[size_t(r)].load(std::memory_order_relaxed);
  }

 private:
  friend class GetCall;
  friend class BatchGetCall;
  void read(WindowReadOp* const* ops, size_t n);
  void get_read_done(GetCall& call);
  void batch_read_done(BatchGetCall& call);
  // The estimate (and cwnd when asked) of `p` from its window sums; counts the verdict.
  grpc::Status answer(const v1::GetRequest& req, const Prefix& p, const Accumulator& acc,
                      const std::string& where, v1::Estimate& out);
  void fill(const Prefix& p, const Accumulator& acc, v1::Estimate& out) const;
  grpc::Status add_cwnd(const v1::GetRequest& req, const std::string& where,
                        v1::Estimate& out) const;

  EstimateStore& store_;
  AsyncWindowReader* reader_;
  const Clock& clock_;
  CoreOptions opts_;
  SampleSink* sink_;
  SteadyClock steady_;
  const Clock& cache_clock_;
  EstimateCache cache_;
  std::atomic<uint64_t> use_estimate_{0};
  std::atomic<uint64_t> slow_start_{0};
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> wc_by_median_{0};
  std::atomic<uint64_t> wc_by_mean_{0};
  std::atomic<uint64_t> wc_left_out_{0};
  std::array<std::atomic<uint64_t>, size_t(ReportReject::kCount)> report_rejected_{};
  // Report rate limit: tokens per caller (bounded: beyond kMaxReportCallers the table is
  // emptied, which can only be generous, never lock anyone out).
  static constexpr size_t kMaxReportCallers = 10'000;
  struct Bucket {
    double tokens = 0;
    uint64_t last_ns = 0;
  };
  std::mutex rate_mu_;
  std::unordered_map<std::string, Bucket> rate_;
  bool take_report_token(const std::string& caller);
  // The distinct-client cap: the clients each caller added per prefix in the current period
  // (window_s of the service clock). Bounded: beyond kMaxReportCallers callers the table is
  // emptied (as the rate table); a caller's prefixes beyond kMaxReportPrefixesPerCaller are
  // refused.
  static constexpr size_t kMaxReportPrefixesPerCaller = 100'000;
  struct CallerClients {
    uint64_t period = UINT64_MAX;
    std::unordered_map<Prefix, std::vector<IpAddr>, PrefixHash> by_prefix;
  };
  std::mutex clients_mu_;
  std::unordered_map<std::string, CallerClients> caller_clients_;
  bool admit_client(const std::string& caller, const IpAddr& client, uint64_t now_ns);
};

}  // namespace spand
