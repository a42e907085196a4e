// EstimateStore on Redis, one node or a Redis Cluster. Key schema and scripts: redis_schema.hpp
// and README, "Redis aggregation (gateway/estimates/)".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "estimates/estimates_options.hpp"
#include "estimates/redis_executor.hpp"
#include "estimates/store.hpp"

namespace spand {

struct RedisStoreOptions {
  RedisEndpoint endpoint;                    // single node (used when cluster_seeds is empty)
  std::vector<RedisEndpoint> cluster_seeds;  // non-empty = Redis Cluster
  RedisConnOptions conn;
  WindowOptions window;
  uint32_t key_ttl_s = 0;            // 0 = window_s + bucket_s (wall-clock expiry)
  uint32_t activity_chunk = 10'000;  // prefixes per activity script call (bounds its run time)
  // spand:{g}:clock never moves beyond the Redis server's TIME + this (docs/redis-schema.md).
  uint32_t clock_skew_s = kDefaultClockSkewS;
  // How often a writer that agreed on the client id key checks it again (expect_client_key).
  std::chrono::milliseconds client_key_recheck{10'000};
};

// Fills store options from the gateway's options: redis_url or redis_cluster_seeds, the password
// file, window and bucket. False with `error` on a malformed URL or an unreadable file.
bool redis_store_options_from(const EstimatesOptions& opts, RedisStoreOptions& out,
                              std::string& error);

// A bucket update as the writer hands it over: `seq` (assigned by the store on the first try,
// kept across retries) makes a retry after a lost reply harmless.
struct PendingUpdate {
  BucketUpdate update;
  uint64_t seq = 0;
};

// What the SampleWriter writes into (a fake in unit tests).
class UpdateSink {
 public:
  virtual ~UpdateSink() = default;
  // Writes what it can; applied[i] = 1 for each update now in Redis (or found already there).
  // Returns false with `error` if any update was not written. `clock_ns` (0 = none) is the
  // writer's newest capture time.
  virtual bool write_updates(std::vector<PendingUpdate>& updates, uint64_t clock_ns,
                             std::vector<uint8_t>& applied, std::string& error) = 0;
  virtual uint64_t reconnects() const { return 0; }
};

struct RedisStoreStats {
  uint64_t duplicates_skipped = 0;  // updates a retry found already applied
  uint64_t activity_errors = 0;     // activity/clock writes that failed (retried next flush)
  uint64_t clock_clamped = 0;       // clock writes cut to Redis TIME + clock_skew_s
  uint64_t clock_repaired = 0;      // stored clocks found beyond that limit and replaced
  uint64_t reconnects = 0;
  uint64_t slot_refreshes = 0;
  uint64_t redirects = 0;
  std::vector<RedisNodeStats> nodes;
};

// Thread-safe (one mutex around the connection(s)); for parallel reads give each thread its own
// store.
class RedisStore final : public EstimateStore, public UpdateSink {
 public:
  explicit RedisStore(const RedisStoreOptions& opts);

  bool write(const std::vector<BucketUpdate>& updates, std::string& error) override;
  bool read_window(const Prefix& prefix, uint64_t now_ns, Accumulator& out,
                   std::string& error) override;
  bool top_prefixes(uint64_t now_ns, size_t limit, std::vector<PrefixActivity>& out,
                    std::string& error) override;

  bool write_updates(std::vector<PendingUpdate>& updates, uint64_t clock_ns,
                     std::vector<uint8_t>& applied, std::string& error) override;
  uint64_t reconnects() const override;

  // Many prefixes, one round trip per node. ok[i] = 0 where that prefix's read failed.
  bool read_windows(const std::vector<Prefix>& prefixes, uint64_t now_ns,
                    std::vector<Accumulator>& out, std::vector<uint8_t>& ok, std::string& error);
  // Many reads, each with its own window end: one HMGET each, one round trip per node (the
  // estimate service reads through window_reader.hpp, which uses this on a Redis Cluster).
  void read_windows(WindowRead* const* reads, size_t n);
  // The newest capture time written by any gateway (0 if none yet).
  bool read_clock(uint64_t& now_ns, std::string& error);

  // The client id key check (docs/redis-schema.md, "The client id key's fingerprint"): from now
  // on write_updates compares `fingerprint` (client_key_fingerprint_hex of this writer's key)
  // with PREFIX:{g}:client_key_fp before writing: at the first write (SET NX, then GET: the first
  // writer's fingerprint stays), then every client_key_recheck (GET). While they differ nothing
  // is written (every update fails with "client id key mismatch: ..." and stays with the
  // writer), and each check that finds another fingerprint is counted. A stored fingerprint
  // deleted after this store agreed is not claimed again by it: the next writer to start claims
  // it (key rotation), and this store then finds the difference at its next check.
  void expect_client_key(const std::string& fingerprint);
  enum class ClientKeyState : uint8_t { kUnchecked = 0, kAgreed = 1, kMismatch = 2 };
  ClientKeyState client_key_state() const { return key_state_.load(std::memory_order_relaxed); }
  uint64_t client_key_mismatches() const { return key_mismatches_.load(std::memory_order_relaxed); }

  RedisStoreStats stats() const;
  // Without the mutex (never waits for a flush in progress).
  uint64_t clock_clamped() const { return clock_clamped_.load(std::memory_order_relaxed); }
  uint64_t clock_repaired() const { return clock_repaired_.load(std::memory_order_relaxed); }
  const std::string& writer_id() const { return writer_id_; }

 private:
  RedisCommand write_command(const PendingUpdate& u) const;
  RedisCommand read_command(const Prefix& prefix, uint64_t now_ns) const;
  using ActivityMap = std::map<uint64_t, std::unordered_map<std::string, uint64_t>>;
  void append_activity_commands(std::vector<RedisCommand>& cmds, const ActivityMap& activity,
                                uint64_t clock_ns);

  RedisStoreOptions opts_;
  uint32_t ttl_s_;
  std::string writer_id_;  // random per process: names this writer in the exactly-once check
  mutable std::mutex mu_;
  std::unique_ptr<RedisExecutor> exec_;
  uint64_t next_seq_ = 1;
  // Samples per prefix of updates already applied, by bucket, not yet in the activity sets:
  // written with the next flush's pipeline so activity never counts an update that failed.
  ActivityMap activity_pending_;
  uint64_t clock_pending_ns_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t activity_errors_ = 0;
  std::atomic<uint64_t> clock_clamped_{0};  // atomics: read without the mutex (metrics)
  std::atomic<uint64_t> clock_repaired_{0};
  bool client_key_agrees_locked(bool writing, std::string& error);
  std::string key_fingerprint_;  // empty: no check
  std::chrono::steady_clock::time_point key_checked_at_{};
  std::atomic<ClientKeyState> key_state_{ClientKeyState::kUnchecked};
  std::atomic<uint64_t> key_mismatches_{0};
};

}  // namespace spand
