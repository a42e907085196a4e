// The estimate service's logic, free of gRPC transport: parses requests, reads the window from
// the store (one round trip, or the short cache), computes the estimate and, when asked, the
// initial window (libspand). The gRPC handlers in service.cpp are thin shells over this class,
// so unit tests drive it with a fake store and a fake clock.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "estimate_cache.hpp"
#include "estimates/estimate.hpp"
#include "estimates/store.hpp"
#include "prefix.hpp"
#include "sample.hpp"
#include "spand/v1/estimates.pb.h"

namespace spand {

struct CoreOptions {
  PrefixConfig prefix;
  uint32_t min_samples = kDefaultMinSamples;  // fewer W_c samples in the window: SLOW_START
  DecayOptions decay;                         // off by default (estimates/estimate.hpp)
  uint32_t default_mss_bytes = 1460;
  uint32_t default_acked_per_ack = 1;  // b; 2 for receivers with delayed ACKs
  uint64_t cache_ttl_ms = 1000;        // 0 disables the cache
  size_t cache_max_entries = 100'000;
};

// Limits, part of the API contract (proto comments, README, "Estimate service (`spand.v1`)").
inline constexpr size_t kMaxBatch = 1000;
inline constexpr size_t kMaxWatchPrefixes = 1000;
inline constexpr uint32_t kMaxTop = 1000;
inline constexpr uint32_t kDefaultTop = 10;

// Where Report's agent samples go: the same writer the gateway's own samples take, so they
// enter the same window. Called from gRPC threads; implementations must be thread-safe.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void submit(const Sample& s) = 0;
};

// Monotonic time for the cache's TTL (not the estimate clock, which is capture time).
class SteadyClock final : public Clock {
 public:
  uint64_t now_ns() const override;
};

class EstimatesCore {
 public:
  // `store` must be safe to call from several threads (see store_pool.hpp); `sink` may be null
  // (Report then answers UNIMPLEMENTED).
  EstimatesCore(EstimateStore& store, const Clock& clock, const CoreOptions& opts,
                SampleSink* sink = nullptr, const Clock* cache_clock = nullptr);

  grpc::Status get(const v1::GetRequest& req, v1::Estimate& out);
  grpc::Status batch_get(const v1::BatchGetRequest& req, v1::BatchGetResponse& out);
  grpc::Status top(const v1::TopRequest& req, v1::TopResponse& out);
  // One streamed Report message: true if accepted (samples handed to the sink), else false
  // with `error` set. Counts in `summary`.
  bool report(const v1::ReportSample& msg, v1::ReportSummary& summary);
  bool can_report() const { return sink_ != nullptr; }

  // The estimate of an already-parsed prefix; `use_cache` false for Watch, which must see the
  // store's latest state. UNAVAILABLE when the store fails.
  grpc::Status estimate_prefix(const Prefix& p, bool use_cache, v1::Estimate& out);

  const CoreOptions& options() const { return opts_; }
  // Verdict counts, for spand_estimates_total{verdict}.
  uint64_t use_estimate_count() const { return use_estimate_.load(std::memory_order_relaxed); }
  uint64_t slow_start_count() const { return slow_start_.load(std::memory_order_relaxed); }
  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }

 private:
  grpc::Status get_one(const v1::GetRequest& req, v1::Estimate& out, const std::string& where);
  void fill(const Prefix& p, const Accumulator& acc, v1::Estimate& out) const;
  grpc::Status add_cwnd(const v1::GetRequest& req, const std::string& where,
                        v1::Estimate& out) const;

  EstimateStore& store_;
  const Clock& clock_;
  CoreOptions opts_;
  SampleSink* sink_;
  SteadyClock steady_;
  const Clock& cache_clock_;
  EstimateCache cache_;
  std::atomic<uint64_t> use_estimate_{0};
  std::atomic<uint64_t> slow_start_{0};
  std::atomic<uint64_t> cache_hits_{0};
};

}  // namespace spand
