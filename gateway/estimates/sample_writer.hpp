// The gateway's Redis writer, driven by the control plane: add() accumulates samples per
// (prefix, bucket, origin) in memory; tick() hands them, every flush_interval_ms of wall time, to
// a flush thread that writes them in one pipelined batch. Failed updates stay in a bounded
// backlog (oldest dropped first, counted) and are retried on the next flush; reconnect backoff
// lives in the Redis executor. add() and tick() never wait for Redis.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dataplane/flow_record.hpp"
#include "estimates/estimates_options.hpp"
#include "estimates/redis_store.hpp"

namespace spand {

struct SampleWriterOptions {
  uint32_t flush_interval_ms = 1000;
  uint32_t bucket_s = 10;
  uint32_t backlog_max_updates = 1'000'000;
  PrefixConfig prefix;
  // Client ids of W_c samples (Accumulator::add): every writer into one Redis uses the same key.
  SipKey client_key = kPublicClientIdKey;
  // false: tick() flushes inline on the caller's thread (tests); true: a flush thread does.
  bool background = true;
  // Admission (docs/redis-schema.md, "What the writer refuses"): a sample stamped more than
  // clock_skew_s beyond the wall clock, a W_c above max_wc_segments or an RTT above max_rtt_us is
  // not aggregated, and counted.
  uint32_t clock_skew_s = kDefaultClockSkewS;
  uint32_t max_wc_segments = kMaxWcSegments;
  uint32_t max_rtt_us = kMaxRttUs;
  // Wall clock in Unix ns; null = std::chrono::system_clock (tests inject one).
  std::function<uint64_t()> wall_now_ns;
};

SampleWriterOptions writer_options_from(const EstimatesOptions& opts);

// The client id key from `path` (EstimatesOptions::client_key_file): its first line, 32 hex
// digits (16 bytes, k0 from the first 8 in little-endian order); the word "public" (kPublicKeyWord)
// stands for kPublicClientIdKey (say ./public for a file of that name). False with `error` naming
// the file when it cannot be read or is not that.
inline constexpr const char* kPublicKeyWord = "public";
bool read_client_key_file(const std::string& path, SipKey& key, std::string& error);
// client_key_fingerprint(key) as 16 lowercase hex digits: what writers store and compare in Redis.
std::string client_key_fingerprint_hex(const SipKey& key);

// Why add() refused a sample.
enum class SampleReject : uint8_t { kNone = 0, kFuture, kWcBound, kRttBound };
// The admission rule of add(), alone (Report applies the same bounds before queueing).
SampleReject check_sample(const Sample& s, const SampleWriterOptions& opts, uint64_t wall_now_ns);
const char* sample_reject_name(SampleReject r);
uint64_t system_wall_now_ns();

struct WriterStats {
  uint64_t samples_added = 0;
  uint64_t flows_added = 0;         // flow records that added to the loss figures (add_flow)
  uint64_t flushes_total = 0;       // flushes that sent at least one update
  uint64_t flush_errors_total = 0;  // flushes where some update was not written
  uint64_t updates_written_total = 0;
  uint64_t backlog_updates = 0;        // gauge: updates waiting for a successful write
  uint64_t backlog_samples = 0;        // gauge: samples inside those updates
  uint64_t backlog_dropped_total = 0;  // updates dropped because the backlog was full
  uint64_t samples_dropped_total = 0;  // samples inside those updates
  uint64_t redis_reconnects_total = 0;
  uint64_t rejected_future = 0;     // samples stamped beyond wall clock + clock_skew_s
  uint64_t rejected_wc_bound = 0;   // W_c above max_wc_segments
  uint64_t rejected_rtt_bound = 0;  // RTT above max_rtt_us
  double last_flush_latency_s = 0;
};

class SampleWriter {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the flush thread after each flush with its latency and outcome (for a histogram).
  using FlushObserver = std::function<void(double latency_s, bool ok)>;

  SampleWriter(UpdateSink& sink, const SampleWriterOptions& opts);
  ~SampleWriter();  // stops the flush thread; pending samples not yet flushed are lost (see finish)

  // Control thread. kNewConnection samples are ignored. False (and counted) when the sample is
  // refused by check_sample().
  bool add(const Sample& s);
  // Control thread. A finished connection's record: its server->client direction, when it
  // carried data (unique_bytes > 0), adds to the loss figures (Accumulator::loss) of the client's
  // prefix, in the bucket of the connection's last packet (last_ns), origin gateway: one flow,
  // never4 when its flight never reached 4 segments, and its loss events by recovery. The same
  // rule as `spandctl losses` (its default direction, s2c). False when it adds nothing: no data
  // that way, or last_ns beyond wall clock + clock_skew_s (counted as rejected_future).
  bool add_flow(const FlowRecord& r);
  // Control thread, often. Bucket assignment uses capture time (the samples' ts_ns); the flush
  // cadence uses wall time.
  void tick(uint64_t capture_now_ns, Clock::time_point wall_now);
  // Hands everything over and waits (at most max_wait) until a flush has tried it. True if the
  // backlog is empty afterwards.
  bool finish(std::chrono::milliseconds max_wait);

  void set_flush_observer(FlushObserver f);
  WriterStats stats() const;
  // The error of the last flush that failed ("" if none has).
  std::string last_error() const;
  size_t pending_keys() const { return pending_.size(); }

 private:
  struct Key {
    Prefix prefix;
    uint64_t bucket_start_s;
    SampleOrigin origin;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      return PrefixHash{}(k.prefix) * 31 + std::hash<uint64_t>{}(k.bucket_start_s) * 7 +
             size_t(k.origin);
    }
  };

  void hand_over(uint64_t capture_now_ns);
  void flush_once();  // flush thread (or inline): backlog + handed-over updates -> sink
  void run();
  void drop_oldest_beyond_bound(std::deque<PendingUpdate>& q);

  UpdateSink& sink_;
  SampleWriterOptions opts_;
  FlushObserver observer_;

  // Control thread only.
  std::unordered_map<Key, Accumulator, KeyHash> pending_;
  Clock::time_point last_handover_{};
  bool started_ = false;

  // Shared with the flush thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingUpdate> handed_;
  uint64_t handed_clock_ns_ = 0;
  bool flush_requested_ = false;
  bool stop_ = false;
  bool flushing_ = false;
  uint64_t flush_generation_ = 0;  // completed flushes, for finish()
  uint64_t finish_target_ = 0;     // finish() keeps flushes coming until this generation
  std::string last_error_;

  // Flush thread only.
  std::deque<PendingUpdate> backlog_;

  std::atomic<uint64_t> samples_added_{0}, flows_added_{0}, flushes_{0}, flush_errors_{0},
      written_{0}, backlog_gauge_{0}, backlog_samples_{0}, dropped_{0}, samples_dropped_{0},
      rejected_future_{0}, rejected_wc_{0}, rejected_rtt_{0};
  std::atomic<double> last_latency_s_{0};
  std::thread thread_;
};

}  // namespace spand
