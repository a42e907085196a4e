// RedisStore and SampleWriter against one real redis-server started by the test.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <memory>

#include "estimates/estimate.hpp"
#include "estimates/redis_schema.hpp"
#include "estimates/redis_store.hpp"
#include "estimates/sample_writer.hpp"
#include "redis_harness.hpp"
#include "test_data.hpp"

namespace spand::test {
namespace {

using Wall = SampleWriter::Clock;

RedisStoreOptions store_opts(const RedisServer& srv, uint32_t window_s = 300,
                             uint32_t bucket_s = 10) {
  RedisStoreOptions o;
  o.endpoint = srv.endpoint();
  o.window.window_s = window_s;
  o.window.bucket_s = bucket_s;
  o.conn.command_timeout_ms = 2000;
  return o;
}

SampleWriterOptions sync_writer(uint32_t backlog_max = 100'000, uint32_t bucket_s = 10) {
  SampleWriterOptions o;
  o.background = false;
  o.bucket_s = bucket_s;
  o.backlog_max_updates = backlog_max;
  return o;
}

// Drives a sync-mode writer: every call is one flush interval of (fake) wall time later.
struct Driver {
  SampleWriter& w;
  Wall::time_point t{};
  explicit Driver(SampleWriter& writer) : w(writer) { w.tick(0, t); }
  void flush(uint64_t capture_now_ns) {
    t += std::chrono::seconds(1);
    w.tick(capture_now_ns, t);
  }
};

void expect_matches(const Accumulator& got, const Expected& want, const std::string& what) {
  EXPECT_EQ(got.wc_count, want.wc_n) << what;
  EXPECT_DOUBLE_EQ(got.wc_sum, want.wc_sum) << what;
  EXPECT_DOUBLE_EQ(got.wc_sumsq, want.wc_sumsq) << what;
  EXPECT_EQ(got.rtt_count, want.rtt_n) << what;
  EXPECT_DOUBLE_EQ(got.rtt_sum_us, want.rtt_sum) << what;
  EXPECT_EQ(got.rtt_min_us, want.rtt_min) << what;
  EXPECT_EQ(got.newest_ts_ns, want.newest) << what;
}

class SingleRedis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServer();
    std::string e;
    ASSERT_TRUE(server_->start(e)) << e;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    std::string e;
    if (!server_->running()) {
      ASSERT_TRUE(server_->start(e)) << e;
    }
    RedisConn c;
    ASSERT_TRUE(server_->connect(c));
    RedisReply r;
    ASSERT_TRUE(c.command({"FLUSHALL"}, r, e)) << e;
  }
  static RedisServer* server_;
};
RedisServer* SingleRedis::server_ = nullptr;

// Samples for `prefixes` prefixes, spread over capture times [t0, t0 + span_s).
std::vector<Sample> make_samples(uint32_t prefixes, uint64_t t0_ns, uint32_t span_s, uint32_t count,
                                 uint64_t seed) {
  Lcg rng{seed};
  std::vector<Sample> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t p = rng.next() % prefixes;
    uint64_t ts = t0_ns + uint64_t(rng.next() % (span_s * 1000)) * 1'000'000ULL + rng.next() % 1000;
    bool wc = rng.next() % 3 != 0;
    uint32_t value = wc ? 1 + rng.next() % 200 : 500 + rng.next() % 300'000;
    out.push_back(
        make_sample(wc ? SampleKind::kWc : SampleKind::kRtt, client_of(p, rng.next()), value, ts));
  }
  std::sort(out.begin(), out.end(),
            [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

TEST_F(SingleRedis, WindowSumsEqualSumsOverRawSamples) {
  RedisStore store(store_opts(*server_));
  SampleWriter w(store, sync_writer());
  Driver d(w);
  const uint64_t t0 = 1'700'000'000 * kSec;
  auto samples = make_samples(20, t0, 900, 6000, 42);
  // Replay: a flush every 10 s of capture time, as a gateway replaying faster than real time.
  uint64_t next_flush = t0 + 10 * kSec;
  for (const Sample& s : samples) {
    while (s.ts_ns >= next_flush) {
      d.flush(next_flush);
      next_flush += 10 * kSec;
    }
    w.add(s);
  }
  d.flush(next_flush);
  ASSERT_EQ(w.stats().backlog_updates, 0u);
  ASSERT_EQ(w.stats().flush_errors_total, 0u);

  // With "now" on the last nanosecond of a bucket the window (now - S, now] is whole buckets, so
  // the plain definition over raw samples must match exactly.
  for (uint64_t end_s : {t0 / kSec + 300, t0 / kSec + 470, t0 / kSec + 900}) {
    uint64_t now = end_s * kSec - 1;
    for (uint32_t p = 0; p < 20; ++p) {
      Accumulator acc;
      std::string e;
      ASSERT_TRUE(store.read_window(prefix24(p), now, acc, e)) << e;
      Expected want = expected_in(samples, prefix24(p), now - 300 * kSec, now);
      ASSERT_GT(want.wc_n, 0u);
      expect_matches(acc, want, prefix24(p).to_string() + " @" + std::to_string(end_s));
    }
  }
  // The batch read gives the same as one at a time.
  std::vector<Prefix> ps;
  for (uint32_t p = 0; p < 20; ++p) ps.push_back(prefix24(p));
  std::vector<Accumulator> accs;
  std::vector<uint8_t> ok;
  std::string e;
  uint64_t now = (t0 / kSec + 900) * kSec - 1;
  ASSERT_TRUE(store.read_windows(ps, now, accs, ok, e)) << e;
  for (uint32_t p = 0; p < 20; ++p)
    expect_matches(accs[p], expected_in(samples, ps[p], now - 300 * kSec, now), "batch");

  // The clock key holds the newest capture time handed to the writer.
  uint64_t clock = 0;
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_EQ(clock, next_flush);

  // top_prefixes: sample counts per prefix in the window, busiest first. The activity of a flush
  // is written with the next one, so flush once more first.
  d.flush(next_flush);
  std::vector<PrefixActivity> top;
  ASSERT_TRUE(store.top_prefixes(now, 5, top, e)) << e;
  ASSERT_EQ(top.size(), 5u);
  for (size_t i = 0; i < top.size(); ++i) {
    Expected want = expected_in(samples, top[i].prefix, now - 300 * kSec, now);
    EXPECT_EQ(top[i].samples, want.wc_n + want.rtt_n) << top[i].prefix.to_string();
    if (i > 0) {
      EXPECT_LE(top[i].samples, top[i - 1].samples);
    }
  }
  uint64_t busiest = 0;
  for (uint32_t p = 0; p < 20; ++p) {
    Expected want = expected_in(samples, prefix24(p), now - 300 * kSec, now);
    busiest = std::max(busiest, want.wc_n + want.rtt_n);
  }
  EXPECT_EQ(top[0].samples, busiest);
}

TEST_F(SingleRedis, SamplesOlderThanTheWindowLeaveByCaptureTime) {
  RedisStore store(store_opts(*server_));
  SampleWriter w(store, sync_writer());
  Driver d(w);
  const uint64_t t = 1'700'000'000 * kSec;
  for (int i = 0; i < 6; ++i)
    w.add(make_sample(SampleKind::kWc, client_of(1, i), 20, t + i * kSec));
  for (int i = 0; i < 2; ++i)
    w.add(make_sample(SampleKind::kWc, client_of(1, i), 40, t + 250 * kSec));
  d.flush(t + 250 * kSec);

  auto estimate_at = [&](uint64_t now) {
    Accumulator acc;
    std::string e;
    EXPECT_TRUE(store.read_window(prefix24(1), now, acc, e)) << e;
    return compute_estimate(acc, now, 5);
  };
  // 260 s after the first samples: all 8 are inside.
  Estimate e1 = estimate_at(t + 260 * kSec);
  EXPECT_EQ(e1.samples, 8u);
  EXPECT_EQ(e1.verdict, Verdict::kUseEstimate);
  EXPECT_DOUBLE_EQ(e1.wc_mean_segments, (6 * 20.0 + 2 * 40.0) / 8);
  // Client means 30, 30, 20, 20, 20, 20: the lower median is 20.
  EXPECT_TRUE(e1.wc_is_median);
  EXPECT_DOUBLE_EQ(e1.wc_segments, 20.0);
  // 310 s after: the first six are older than S = 300 s; two samples remain: slow start.
  Estimate e2 = estimate_at(t + 310 * kSec);
  EXPECT_EQ(e2.samples, 2u);
  EXPECT_EQ(e2.verdict, Verdict::kSlowStart);
  EXPECT_DOUBLE_EQ(e2.wc_segments, 40.0);
  EXPECT_DOUBLE_EQ(e2.age_s, 60.0);
  // 600 s after: nothing.
  EXPECT_EQ(estimate_at(t + 600 * kSec).samples, 0u);
}

TEST_F(SingleRedis, TwoWritersCombineAndRetriesAreExactlyOnce) {
  RedisStore a(store_opts(*server_)), b(store_opts(*server_));
  ASSERT_NE(a.writer_id(), b.writer_id());
  const uint64_t t = 1'700'000'000 * kSec;
  BucketUpdate u;
  u.prefix = prefix24(7);
  u.bucket_start_s = t / kSec;
  for (uint32_t v : {10u, 20u}) u.acc.add(make_sample(SampleKind::kWc, client_of(7, 1), v, t + 1));
  u.acc.add(make_sample(SampleKind::kRtt, client_of(7, 1), 3000, t + 2));
  BucketUpdate v = u;
  v.acc = Accumulator{};
  v.acc.add(make_sample(SampleKind::kWc, client_of(7, 2), 30, t + 3));
  v.acc.add(make_sample(SampleKind::kRtt, client_of(7, 2), 2000, t + 1));

  std::vector<PendingUpdate> ua = {{u, 0}}, ub = {{v, 0}};
  std::vector<uint8_t> applied;
  std::string e;
  ASSERT_TRUE(a.write_updates(ua, 0, applied, e)) << e;
  ASSERT_TRUE(b.write_updates(ub, 0, applied, e)) << e;
  // The same update again (as after a lost reply): found already applied, not added twice.
  ASSERT_TRUE(a.write_updates(ua, 0, applied, e)) << e;
  EXPECT_EQ(applied[0], 1);
  EXPECT_EQ(a.stats().duplicates_skipped, 1u);

  Accumulator acc;
  ASSERT_TRUE(a.read_window(prefix24(7), t + 5 * kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 3u);
  EXPECT_EQ(acc.wc_sum, 60.0);
  EXPECT_EQ(acc.wc_sumsq, 100.0 + 400.0 + 900.0);
  EXPECT_EQ(acc.rtt_count, 2u);
  EXPECT_EQ(acc.rtt_min_us, 2000u);
  EXPECT_EQ(acc.newest_ts_ns, t + 3);

  // The prefix's window hash carries a TTL of window + bucket (wall clock, garbage collection
  // only).
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  ASSERT_TRUE(c.command({"TTL", window_key(prefix24(7))}, r, e)) << e;
  EXPECT_GT(r.integer, 300);
  EXPECT_LE(r.integer, 310);
}

// The client id key check (docs/redis-schema.md, "The client id key's fingerprint"): the first
// writer stores its key's fingerprint; a writer with another key writes nothing (its ids would
// name other clients), says why, counts it, and keeps its updates; a deleted fingerprint is
// claimed by the next writer that checks with SET NX (key rotation), and a writer that had agreed
// finds the new one at its next check.
TEST_F(SingleRedis, WritersWithDifferentClientKeysDoNotMix) {
  RedisStoreOptions o = store_opts(*server_);
  o.client_key_recheck = std::chrono::milliseconds(0);  // check at every write
  RedisStore a(o), b(o);
  const SipKey key_a{1, 2}, key_b{3, 4};
  const std::string fp_a = client_key_fingerprint_hex(key_a),
                    fp_b = client_key_fingerprint_hex(key_b);
  ASSERT_NE(fp_a, fp_b);
  a.expect_client_key(fp_a);
  b.expect_client_key(fp_b);
  const uint64_t t = 1'700'000'000 * kSec;
  auto update = [&](uint32_t net, const SipKey& key) {
    BucketUpdate u;
    u.prefix = prefix24(net);
    u.bucket_start_s = t / kSec;
    u.acc.add(make_sample(SampleKind::kWc, client_of(net, 1), 12, t), key);
    return std::vector<PendingUpdate>{{u, 0}};
  };
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  std::string e;
  auto stored = [&] {
    EXPECT_TRUE(c.command({"GET", client_key_fp_key()}, r, e)) << e;
    return r.type == RedisReply::Type::kString ? r.str : std::string("(nil)");
  };
  auto exists = [&](uint32_t net) {
    EXPECT_TRUE(c.command({"EXISTS", window_key(prefix24(net))}, r, e)) << e;
    return r.integer;
  };

  std::vector<uint8_t> applied;
  auto ua = update(21, key_a), ub = update(22, key_b);
  EXPECT_EQ(a.client_key_state(), RedisStore::ClientKeyState::kUnchecked);
  ASSERT_TRUE(a.write_updates(ua, 0, applied, e)) << e;
  EXPECT_EQ(a.client_key_state(), RedisStore::ClientKeyState::kAgreed);
  EXPECT_EQ(stored(), fp_a);  // the first writer's, as 16 hex digits
  EXPECT_EQ(exists(21), 1);

  e.clear();
  EXPECT_FALSE(b.write_updates(ub, 0, applied, e));
  EXPECT_EQ(applied, std::vector<uint8_t>{0});  // stays with the writer
  EXPECT_NE(e.find("client id key mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find(fp_a), std::string::npos) << e;
  EXPECT_NE(e.find(fp_b), std::string::npos) << e;
  EXPECT_EQ(b.client_key_state(), RedisStore::ClientKeyState::kMismatch);
  EXPECT_EQ(b.client_key_mismatches(), 1u);
  EXPECT_EQ(exists(22), 0);                          // nothing of b's in Redis
  EXPECT_EQ(stored(), fp_a);                         // and a's fingerprint kept
  EXPECT_FALSE(b.write_updates(ub, 0, applied, e));  // every try is refused and counted
  EXPECT_EQ(b.client_key_mismatches(), 2u);
  EXPECT_EQ(exists(22), 0);

  // Rotation: the fingerprint deleted, b (now the deployment's key) claims it at its next write,
  // its kept update goes in; a, which had agreed, does not claim it back and refuses at its next
  // check.
  ASSERT_TRUE(c.command({"DEL", client_key_fp_key()}, r, e)) << e;
  ASSERT_TRUE(b.write_updates(ub, 0, applied, e)) << e;
  EXPECT_EQ(applied, std::vector<uint8_t>{1});
  EXPECT_EQ(b.client_key_state(), RedisStore::ClientKeyState::kAgreed);
  EXPECT_EQ(stored(), fp_b);
  EXPECT_EQ(exists(22), 1);
  auto ua2 = update(23, key_a);
  EXPECT_FALSE(a.write_updates(ua2, 0, applied, e));
  EXPECT_EQ(a.client_key_state(), RedisStore::ClientKeyState::kMismatch);
  EXPECT_EQ(exists(23), 0);

  // A store without expect_client_key (tests, tools) neither checks nor claims.
  ASSERT_TRUE(c.command({"DEL", client_key_fp_key()}, r, e)) << e;
  RedisStore plain(store_opts(*server_));
  auto up = update(24, key_a);
  ASSERT_TRUE(plain.write_updates(up, 0, applied, e)) << e;
  EXPECT_EQ(stored(), "(nil)");
}

TEST_F(SingleRedis, KeyPrefixesKeepDeploymentsApart) {
  // Two deployments on one Redis: each reads only its own samples, clock and activity.
  RedisStoreOptions blue_opts = store_opts(*server_);
  blue_opts.window.key_prefix = "blue";
  RedisStoreOptions green_opts = store_opts(*server_);
  green_opts.window.key_prefix = "green";
  RedisStore blue(blue_opts), green(green_opts);
  const uint64_t t = 1'700'000'100 * kSec;
  BucketUpdate u;
  u.prefix = prefix24(11);
  u.bucket_start_s = bucket_start_of(t, 10);
  u.acc.add(make_sample(SampleKind::kWc, client_of(11, 1), 17, t));
  std::string e;
  ASSERT_TRUE(blue.write({u}, e)) << e;
  ASSERT_TRUE(blue.write({u}, e)) << e;  // carries the first write's activity and clock
  Accumulator acc;
  ASSERT_TRUE(blue.read_window(prefix24(11), t, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 2u);
  acc = Accumulator{};
  ASSERT_TRUE(green.read_window(prefix24(11), t, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 0u);
  uint64_t blue_clock = 0, green_clock = 0;
  ASSERT_TRUE(blue.read_clock(blue_clock, e)) << e;
  ASSERT_TRUE(green.read_clock(green_clock, e)) << e;
  EXPECT_EQ(blue_clock, t);
  EXPECT_EQ(green_clock, 0u);
  std::vector<PrefixActivity> top;
  ASSERT_TRUE(green.top_prefixes(t, 10, top, e)) << e;
  EXPECT_TRUE(top.empty());
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  ASSERT_TRUE(c.command({"EXISTS", "blue:{" + prefix24(11).to_string() + "}:w"}, r, e)) << e;
  EXPECT_EQ(r.integer, 1);
  ASSERT_TRUE(c.command({"EXISTS", window_key(prefix24(11))}, r, e)) << e;
  EXPECT_EQ(r.integer, 0);  // nothing under the default prefix
}

TEST_F(SingleRedis, ScriptCacheFlushedUnderneathIsReloaded) {
  RedisStore store(store_opts(*server_));
  const uint64_t t = 1'700'000'000 * kSec;
  BucketUpdate u;
  u.prefix = prefix24(3);
  u.bucket_start_s = t / kSec;
  u.acc.add(make_sample(SampleKind::kWc, client_of(3, 1), 12, t));
  std::string e;
  ASSERT_TRUE(store.write({u}, e)) << e;
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  ASSERT_TRUE(c.command({"SCRIPT", "FLUSH"}, r, e)) << e;
  ASSERT_TRUE(store.write({u}, e)) << e;  // NOSCRIPT -> SCRIPT LOAD -> retry
  Accumulator acc;
  ASSERT_TRUE(store.read_window(prefix24(3), t, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 2u);
  EXPECT_EQ(acc.wc_sum, 24.0);
}

// Time sanity (docs/redis-schema.md): the clock never moves beyond the Redis server's TIME +
// clock_skew_s, whatever capture time a writer hands over, and a clock already poisoned in Redis
// (2^64 - 1, as one forged Report did before) is replaced by the next write.
TEST_F(SingleRedis, ClockIsBoundedByRedisTimeAndAPoisonedClockRecovers) {
  RedisStoreOptions so = store_opts(*server_);
  so.clock_skew_s = 60;
  RedisStore store(so);
  SampleWriter w(store, sync_writer());
  Driver d(w);
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  std::string e;
  ASSERT_TRUE(c.command({"TIME"}, r, e)) << e;
  const uint64_t redis_now_s = std::strtoull(r.elements.at(0).str.c_str(), nullptr, 10);
  const uint64_t limit_ns = (redis_now_s + 60) * kSec;

  // A capture clock one year ahead: clamped to the limit, and counted.
  d.flush((redis_now_s + 365 * 86400) * kSec);
  uint64_t clock = 0;
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_LE(clock, limit_ns + 2 * kSec);
  EXPECT_GE(clock, limit_ns - 2 * kSec);
  EXPECT_EQ(store.clock_clamped(), 1u);

  // Poisoned by hand (as an older version let one Report do): the next write repairs it.
  ASSERT_TRUE(c.command({"SET", kClockKey, "18446744073709551615"}, r, e)) << e;
  const uint64_t honest = redis_now_s * kSec;
  d.flush(honest);
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_EQ(clock, honest);
  EXPECT_EQ(store.clock_repaired(), 1u);

  // An ordinary clock still only moves forward.
  d.flush(honest - 10 * kSec);
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_EQ(clock, honest);
  d.flush(honest + 5 * kSec);
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_EQ(clock, honest + 5 * kSec);
  EXPECT_EQ(store.clock_clamped(), 1u);
  EXPECT_EQ(store.clock_repaired(), 1u);

  // A sample stamped a year ahead never reaches Redis (nor the clock through its bucket).
  Sample far =
      make_sample(SampleKind::kWc, client_of(1, 7), 10, (redis_now_s + 365 * 86400) * kSec);
  EXPECT_FALSE(w.add(far));
  EXPECT_EQ(w.stats().rejected_future, 1u);
  d.flush(honest + 5 * kSec);
  d.flush(honest + 5 * kSec);
  ASSERT_TRUE(store.read_clock(clock, e)) << e;
  EXPECT_EQ(clock, honest + 5 * kSec);
}

// The W_c clients mask is OR-ed in Lua across writers and updates; a bucket written before the
// mask existed (nine sums and created_s) keeps its created_s when the new script updates it.
TEST_F(SingleRedis, ClientsMaskIsCombinedAndLegacyValuesKeepTheirCreationTime) {
  RedisStore store(store_opts(*server_));
  SampleWriter w(store, sync_writer());
  Driver d(w);
  const uint64_t t0 = 1'700'000'000 * kSec;
  const Prefix p = prefix24(3);
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  std::string e;
  ASSERT_TRUE(c.command({"HSET", window_key(p), bucket_field(t0 / kSec),
                         "2 20 200 0 0 0 1700000000000000001 2 0 1234567"},
                        r, e))
      << e;
  for (int i = 0; i < 10; ++i) w.add(make_sample(SampleKind::kWc, client_of(3, 7), 10, t0 + 1));
  d.flush(t0 + kSec);
  Accumulator acc;
  ASSERT_TRUE(store.read_window(p, t0 + kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 12u);
  EXPECT_EQ(acc.distinct_wc_clients(), 1u);
  ASSERT_TRUE(c.command({"HGET", window_key(p), bucket_field(t0 / kSec)}, r, e)) << e;
  EXPECT_EQ(r.str.substr(r.str.rfind(' ') + 1), "1234567") << r.str;
  // A second writer's other client adds its bit.
  RedisStore store2(store_opts(*server_));
  SampleWriter w2(store2, sync_writer());
  Driver d2(w2);
  IpAddr other = client_of(3, 8);
  for (uint32_t h = 9; client_bit(other) == client_bit(client_of(3, 7)); ++h)
    other = client_of(3, h);
  w2.add(make_sample(SampleKind::kWc, other, 10, t0 + 2));
  d2.flush(t0 + kSec);
  ASSERT_TRUE(store.read_window(p, t0 + kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 13u);
  EXPECT_EQ(acc.distinct_wc_clients(), 2u);
  EXPECT_EQ(compute_estimate(acc, t0 + kSec, 5, {}, 2).verdict, Verdict::kUseEstimate);
}

// The W_c client table is merged in Lua (bottom 16 client ids, the rest counted as overflow):
// 40 clients over two writers, several flushes and two buckets read back as the table of one
// in-memory accumulator of all the samples. A bucket written before the table (nine sums, mask,
// histogram, created_s) that the new script updates keeps samples no table covers: no median.
TEST_F(SingleRedis, WcClientTableIsMergedAcrossWritersFlushesAndBuckets) {
  RedisStore store(store_opts(*server_)), store2(store_opts(*server_));
  SampleWriter w(store, sync_writer()), w2(store2, sync_writer());
  Driver d(w), d2(w2);
  const uint64_t t0 = 1'700'000'000 * kSec;
  const Prefix p = prefix24(4);
  Accumulator all;
  Lcg rng{7};
  for (int flush = 0; flush < 4; ++flush) {
    for (uint32_t host = 1; host <= 40; ++host) {
      if (rng.next() % 3 == 0) continue;
      const Sample s = make_sample(SampleKind::kWc, client_of(4, host), 1 + rng.next() % 60,
                                   t0 + uint64_t(flush) * 6 * kSec + host);
      all.add(s);
      (host % 2 ? w : w2).add(s);
    }
    d.flush(t0 + uint64_t(flush) * 6 * kSec);
    d2.flush(t0 + uint64_t(flush) * 6 * kSec);
  }
  const uint64_t now = t0 + 30 * kSec;
  Accumulator acc;
  std::string e;
  ASSERT_TRUE(store.read_window(p, now, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, all.wc_count);
  ASSERT_TRUE(acc.has_wc_client_median());
  ASSERT_EQ(acc.wc_client_n, kWcClientSlots);
  EXPECT_EQ(acc.wc_client_overflow, all.wc_client_overflow);
  for (uint32_t i = 0; i < kWcClientSlots; ++i) {
    EXPECT_EQ(acc.wc_client[i].id, all.wc_client[i].id) << i;
    EXPECT_EQ(acc.wc_client[i].count, all.wc_client[i].count) << i;
    EXPECT_EQ(acc.wc_client[i].sum, all.wc_client[i].sum) << i;
  }
  EXPECT_DOUBLE_EQ(acc.wc_client_median(), all.wc_client_median());

  const Prefix q = prefix24(5);
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  ASSERT_TRUE(c.command({"HSET", window_key(q), bucket_field(t0 / kSec),
                         "2 20 200 0 0 0 1700000000000000001 2 0 1 0:0 1234567"},
                        r, e))
      << e;
  for (uint32_t host = 1; host <= 5; ++host)
    w.add(make_sample(SampleKind::kWc, client_of(5, host), 10, t0 + 1));
  d.flush(t0 + kSec);
  ASSERT_TRUE(store.read_window(q, t0 + kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 7u);
  EXPECT_EQ(acc.wc_client_samples, 5u);
  EXPECT_FALSE(acc.has_wc_client_median());
  ASSERT_TRUE(c.command({"HGET", window_key(q), bucket_field(t0 / kSec)}, r, e)) << e;
  EXPECT_EQ(r.str.substr(r.str.rfind(' ') + 1), "1234567") << r.str;
}

// A finished connection's record as the gateway's collector hands it over: the server->client
// direction's unique bytes, largest flight and loss events by recovery; the client->server
// direction carries `c2s_bytes` with two loss events of its own (never counted: the figures are
// the servers' data).
FlowRecord make_flow(IpAddr client, uint64_t last_ns, uint64_t s2c_bytes, uint16_t max_flight,
                     uint32_t fast, uint32_t timeout, uint64_t c2s_bytes = 300) {
  FlowRecord r;
  r.client = client;
  r.first_ns = last_ns - kSec / 2;
  r.last_ns = last_ns;
  r.s2c.unique_bytes = s2c_bytes;
  r.s2c.bytes = s2c_bytes;
  r.s2c.max_flight_segments = max_flight;
  r.s2c.loss_events_fast = fast;
  r.s2c.loss_events_timeout = timeout;
  r.c2s.unique_bytes = c2s_bytes;
  r.c2s.max_flight_segments = 1;
  r.c2s.loss_events_fast = 1;
  r.c2s.loss_events_timeout = 1;
  return r;
}

// The loss figures (flows, never4, fast, timeout) are summed by the write script across writers
// and flushes, by the reader across the window's buckets, and a bucket written before them adds
// nothing but keeps its samples. Flows of one /24, by the bucket of their last packet:
//   t0       writer A: f1 (flight 2, 0 fast, 1 timeout), f2 (flight 10, 2 fast, 0 timeout),
//                      f3 (no server data: not a flow here, its c2s losses not counted)
//            writer B: f4 (flight 3, 0 fast, 2 timeout)            -> bucket "3:2:2:3"
//   t0+20 s  writer B: f5 (flight 20, 1 fast, 1 timeout)           -> "1:0:1:1"
//   t0+40 s  a legacy bucket (13 fields, 2 W_c samples), then writer A: f6 (flight exactly 4:
//            reached 4, no loss)                                   -> "1:0:0:0", W_c kept
//   t0+50 s  a legacy bucket with 1 W_c sample and no figures      -> adds nothing
//   t0-300 s writer A: f7 (flight 1, 0 fast, 5 timeout): outside the window ending at t0+55 s
// Window at t0+55 s (300 s, 10 s buckets: t0-240 s .. t0+50 s): flows 3+1+1 = 5; never4 f1, f4 = 2
// (40 %); fast 2+1 = 3; timeout 1+2+1 = 4 (4/7 = 57.14 % by timeout); W_c samples 1+2+1 = 4.
TEST_F(SingleRedis, LossFiguresAreSummedAcrossWritersBucketsAndLegacyValues) {
  RedisStore store(store_opts(*server_)), store2(store_opts(*server_));
  SampleWriter a(store, sync_writer()), b(store2, sync_writer());
  Driver da(a), db(b);
  const uint64_t t0 = 1'700'000'000 * kSec;
  const Prefix p = prefix24(6);
  RedisConn c;
  ASSERT_TRUE(server_->connect(c));
  RedisReply r;
  std::string e;
  // Created now (wall time): a legacy field created long ago would be collected as expired when
  // the script creates the other buckets' fields.
  const std::string created = std::to_string(std::time(nullptr));
  ASSERT_TRUE(c.command({"HSET", window_key(p), bucket_field(t0 / kSec + 40),
                         "2 20 200 0 0 0 1700000040000000001 2 0 1 0:0 0,77:2:20 " + created},
                        r, e))
      << e;
  ASSERT_TRUE(c.command({"HSET", window_key(p), bucket_field(t0 / kSec + 50),
                         "1 9 81 0 0 0 1700000050000000001 1 0 1 0:0 0,77:1:9 " + created},
                        r, e))
      << e;
  EXPECT_TRUE(a.add_flow(make_flow(client_of(6, 1), t0 + 1, 10'000, 2, 0, 1)));
  EXPECT_TRUE(a.add_flow(make_flow(client_of(6, 2), t0 + 2, 50'000, 10, 2, 0)));
  EXPECT_FALSE(a.add_flow(make_flow(client_of(6, 3), t0 + 3, 0, 0, 0, 0, 9'000)));
  EXPECT_TRUE(b.add_flow(make_flow(client_of(6, 4), t0 + 4, 4'000, 3, 0, 2)));
  // Another /24 with flows and no sample: never in top.
  EXPECT_TRUE(b.add_flow(make_flow(client_of(8, 1), t0 + 4, 4'000, 3, 0, 2)));
  b.add(make_sample(SampleKind::kWc, client_of(6, 4), 3, t0 + 4));
  da.flush(t0 + kSec);
  db.flush(t0 + kSec);
  EXPECT_TRUE(b.add_flow(make_flow(client_of(6, 5), t0 + 20 * kSec, 900'000, 20, 1, 1)));
  EXPECT_TRUE(a.add_flow(make_flow(client_of(6, 6), t0 + 40 * kSec + 5, 6'000, 4, 0, 0)));
  EXPECT_TRUE(a.add_flow(make_flow(client_of(6, 7), t0 - 300 * kSec, 1'000, 1, 0, 5)));
  da.flush(t0 + 41 * kSec);
  db.flush(t0 + 41 * kSec);

  ASSERT_TRUE(c.command({"HGET", window_key(p), bucket_field(t0 / kSec)}, r, e)) << e;
  const std::string v = r.str;
  const size_t last = v.rfind(' '), before = v.rfind(' ', last - 1);
  EXPECT_EQ(v.substr(before + 1, last - before - 1), "3:2:2:3") << v;
  ASSERT_TRUE(c.command({"HGET", window_key(p), bucket_field(t0 / kSec + 40)}, r, e)) << e;
  EXPECT_NE(r.str.find(" 0,77:2:20 1:0:0:0 " + created), std::string::npos) << r.str;

  Accumulator acc;
  ASSERT_TRUE(store.read_window(p, t0 + 55 * kSec, acc, e)) << e;
  EXPECT_EQ(acc.loss.flows, 5u);
  EXPECT_EQ(acc.loss.never4, 2u);
  EXPECT_EQ(acc.loss.fast, 3u);
  EXPECT_EQ(acc.loss.timeout, 4u);
  EXPECT_EQ(acc.wc_count, 4u);
  const Estimate est = compute_estimate(acc, t0 + 55 * kSec);
  EXPECT_DOUBLE_EQ(est.never4_pct(), 40.0);
  EXPECT_DOUBLE_EQ(est.timeout_pct(), 100.0 * 4 / 7);
  // The flow outside the window is in Redis, in its own bucket.
  ASSERT_TRUE(store.read_window(p, t0 - 300 * kSec, acc, e)) << e;
  EXPECT_EQ(acc.loss.flows, 1u);
  EXPECT_EQ(acc.loss.timeout, 5u);
  // Updates of figures alone are not activity: after the flush that carries the last activity,
  // top holds this /24 with its one W_c sample, not 10.0.8.0/24 (flows only).
  da.flush(t0 + 42 * kSec);
  db.flush(t0 + 42 * kSec);
  std::vector<PrefixActivity> top;
  ASSERT_TRUE(store.top_prefixes(t0 + 55 * kSec, 10, top, e)) << e;
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].prefix, p);
  EXPECT_EQ(top[0].samples, 1u);
  // A window whose buckets all predate the figures has none.
  const Prefix q = prefix24(7);
  ASSERT_TRUE(c.command({"HSET", window_key(q), bucket_field(t0 / kSec),
                         "1 9 81 0 0 0 1700000000000000001 1 0 1 0:0 0,77:1:9 " + created},
                        r, e))
      << e;
  ASSERT_TRUE(store.read_window(q, t0 + kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 1u);
  EXPECT_EQ(acc.loss.flows, 0u);
}

TEST_F(SingleRedis, RedisGoesAwayBacklogIsBoundedAndDrains) {
  RedisStore store(store_opts(*server_));
  // 10 prefixes per flush, bound 25 updates.
  SampleWriter w(store, sync_writer(25));
  Driver d(w);
  const uint64_t t0 = 1'700'000'000 * kSec;
  std::vector<Sample> all;
  uint32_t step = 0;
  auto one_flush = [&](uint32_t first_prefix) {
    uint64_t ts = t0 + step * kSec;
    for (uint32_t p = first_prefix; p < first_prefix + 10; ++p) {
      Sample s = make_sample(SampleKind::kWc, client_of(p, step), 5 + step, ts);
      all.push_back(s);
      w.add(s);
    }
    ++step;
    d.flush(ts);
  };
  one_flush(0);
  one_flush(0);
  ASSERT_EQ(w.stats().updates_written_total, 20u);

  server_->stop();
  // Five flushes with Redis gone: 50 updates, 25 kept (oldest dropped), the writer carries on.
  for (int i = 0; i < 5; ++i) one_flush(100 + 10 * uint32_t(i));
  WriterStats down = w.stats();
  EXPECT_EQ(down.flush_errors_total, 5u);
  EXPECT_EQ(down.backlog_updates, 25u);
  EXPECT_EQ(down.backlog_dropped_total, 25u);
  EXPECT_EQ(down.samples_dropped_total, 25u);
  EXPECT_EQ(down.updates_written_total, 20u);

  std::string e;
  ASSERT_TRUE(server_->start(e)) << e;  // empty again (no persistence): only new writes count
  // Reconnect happens after the backoff (100 ms doubling, jittered): flush (no new samples)
  // until drained.
  ASSERT_TRUE(poll_until(
      [&] {
        d.flush(t0 + step * kSec);
        return w.stats().backlog_updates == 0;
      },
      15'000));
  WriterStats up = w.stats();
  EXPECT_GE(up.redis_reconnects_total, 1u);
  EXPECT_EQ(up.backlog_dropped_total, 25u);

  // The backlog drops the oldest first: all of the outage's first flush (prefixes 100..109) and
  // second (110..119), 5 of the third (120..129; which 5 depends on hash order within a flush),
  // none of the last two (130..149). What survived is in Redis exactly once.
  uint64_t now = t0 + step * kSec;
  int third_present = 0;
  for (uint32_t p = 100; p < 150; ++p) {
    Accumulator acc;
    ASSERT_TRUE(store.read_window(prefix24(p), now, acc, e)) << e;
    Expected full = expected_in(all, prefix24(p), 0, now);
    if (p >= 120 && p < 130 && acc.wc_count > 0) ++third_present;
    if (p >= 130 || (p >= 120 && acc.wc_count > 0))
      expect_matches(acc, full, prefix24(p).to_string());
    else
      expect_matches(acc, Expected{}, prefix24(p).to_string());
  }
  EXPECT_EQ(third_present, 5);
}

TEST(RedisAuth, RequirePassAndAclUser) {
  RedisServer srv(
      {"--requirepass", "s3cret", "--user", "gw", "on", ">gwpass", "~spand:*", "+@all"});
  std::string e;
  ASSERT_TRUE(srv.start(e)) << e;
  const uint64_t t = 1'700'000'000 * kSec;
  BucketUpdate u;
  u.prefix = prefix24(9);
  u.bucket_start_s = t / kSec;
  u.acc.add(make_sample(SampleKind::kWc, client_of(9, 1), 11, t));

  RedisStoreOptions o = store_opts(srv);
  {
    RedisStore none(o);
    EXPECT_FALSE(none.write({u}, e));
    EXPECT_NE(e.find("NOAUTH"), std::string::npos) << e;
  }
  {
    o.conn.auth.password = "wrong";
    RedisStore bad(o);
    EXPECT_FALSE(bad.write({u}, e));
    EXPECT_NE(e.find("AUTH failed"), std::string::npos) << e;
    EXPECT_EQ(e.find("wrong"), std::string::npos) << "password leaked into: " << e;
  }
  {
    o.conn.auth.password = "s3cret";
    RedisStore pw(o);
    ASSERT_TRUE(pw.write({u}, e)) << e;
  }
  {
    // An ACL user limited to spand:* keys: every key the store touches is under spand:.
    ASSERT_TRUE(parse_redis_url("redis://gw:gwpass@127.0.0.1:" + std::to_string(srv.port()),
                                o.endpoint, o.conn.auth, e))
        << e;
    RedisStore acl(o);
    ASSERT_TRUE(acl.write({u}, e)) << e;
    ASSERT_TRUE(acl.write({u}, e)) << e;  // carries the first write's activity (spand:{g}:act:*)
    Accumulator acc;
    ASSERT_TRUE(acl.read_window(prefix24(9), t, acc, e)) << e;
    EXPECT_EQ(acc.wc_count, 3u);
    std::vector<PrefixActivity> top;
    ASSERT_TRUE(acl.top_prefixes(t, 10, top, e)) << e;
    ASSERT_EQ(top.size(), 1u);
    // Activity rides with the next write of the same store: pw's was never carried, and the
    // second acl write's is still pending. Only the first acl write's sample is counted.
    EXPECT_EQ(top[0].samples, 1u);
  }
}

}  // namespace
}  // namespace spand::test
