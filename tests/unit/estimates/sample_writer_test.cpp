#include "estimates/sample_writer.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>

namespace spand {
namespace {

constexpr uint64_t kSec = 1'000'000'000ULL;
using Wall = SampleWriter::Clock;

IpAddr v4(const char* a) {
  uint8_t raw[4];
  inet_pton(AF_INET, a, raw);
  return IpAddr::from_v4(raw);
}

Sample make(SampleKind kind, const char* client, uint32_t value, uint64_t ts_ns,
            SampleOrigin origin = SampleOrigin::kGateway) {
  Sample s;
  s.kind = kind;
  s.client = v4(client);
  s.value = value;
  s.ts_ns = ts_ns;
  s.origin = origin;
  return s;
}

// Records what it is given; fails every update while `down`, or the ones matching `fail_prefix`.
class FakeSink : public UpdateSink {
 public:
  bool write_updates(std::vector<PendingUpdate>& updates, uint64_t clock_ns,
                     std::vector<uint8_t>& applied, std::string& error) override {
    ++calls;
    last_clock_ns = clock_ns;
    applied.assign(updates.size(), 0);
    bool all = true;
    for (size_t i = 0; i < updates.size(); ++i) {
      if (updates[i].seq == 0) updates[i].seq = next_seq++;
      bool fail =
          down || (!fail_prefix.empty() && updates[i].update.prefix.to_string() == fail_prefix);
      if (fail) {
        all = false;
        continue;
      }
      applied[i] = 1;
      written.push_back(updates[i]);
    }
    if (!all) error = "fake failure";
    return all;
  }
  uint64_t reconnects() const override { return 7; }

  bool down = false;
  std::string fail_prefix;
  int calls = 0;
  uint64_t last_clock_ns = 0;
  uint64_t next_seq = 1;
  std::vector<PendingUpdate> written;
};

SampleWriterOptions sync_opts(uint32_t backlog_max = 1000) {
  SampleWriterOptions o;
  o.background = false;
  o.flush_interval_ms = 1000;
  o.bucket_s = 10;
  o.backlog_max_updates = backlog_max;
  return o;
}

TEST(SampleWriter, AccumulatesPerPrefixBucketAndOriginByCaptureTime) {
  FakeSink sink;
  SampleWriter w(sink, sync_opts());
  Wall::time_point t0{};
  w.tick(0, t0);
  w.add(make(SampleKind::kWc, "198.51.100.1", 10, 101 * kSec));
  w.add(make(SampleKind::kWc, "198.51.100.200", 20, 109 * kSec));  // same /24, same bucket
  w.add(make(SampleKind::kRtt, "198.51.100.9", 5000, 109 * kSec + 5));
  w.add(make(SampleKind::kWc, "198.51.100.1", 30, 110 * kSec));  // next bucket
  w.add(make(SampleKind::kWc, "203.0.113.5", 40, 101 * kSec));   // other prefix
  w.add(make(SampleKind::kWc, "198.51.100.1", 50, 102 * kSec, SampleOrigin::kAgent));
  w.add(make(SampleKind::kNewConnection, "198.51.100.1", 0, 103 * kSec));  // ignored
  EXPECT_EQ(w.pending_keys(), 4u);

  // Not yet a flush interval of wall time: nothing is written, whatever the capture time says.
  w.tick(500 * kSec, t0 + std::chrono::milliseconds(999));
  EXPECT_EQ(sink.calls, 0);
  w.tick(500 * kSec, t0 + std::chrono::milliseconds(1000));
  ASSERT_EQ(sink.calls, 1);
  EXPECT_EQ(sink.last_clock_ns, 500 * kSec);
  ASSERT_EQ(sink.written.size(), 4u);

  std::map<std::string, Accumulator> by_key;
  for (const PendingUpdate& u : sink.written) {
    std::string k = u.update.prefix.to_string() + "@" + std::to_string(u.update.bucket_start_s) +
                    (u.update.origin == SampleOrigin::kAgent ? "/agent" : "/gw");
    by_key[k] = u.update.acc;
  }
  const Accumulator& a = by_key.at("198.51.100.0/24@100/gw");
  EXPECT_EQ(a.wc_count, 2u);
  EXPECT_EQ(a.wc_sum, 30.0);
  EXPECT_EQ(a.wc_sumsq, 100.0 + 400.0);
  EXPECT_EQ(a.rtt_count, 1u);
  EXPECT_EQ(a.rtt_min_us, 5000u);
  EXPECT_EQ(a.newest_ts_ns, 109 * kSec + 5);
  EXPECT_EQ(by_key.at("198.51.100.0/24@110/gw").wc_sum, 30.0);
  EXPECT_EQ(by_key.at("203.0.113.0/24@100/gw").wc_sum, 40.0);
  EXPECT_EQ(by_key.at("198.51.100.0/24@100/agent").wc_sum, 50.0);

  WriterStats s = w.stats();
  EXPECT_EQ(s.samples_added, 6u);
  EXPECT_EQ(s.flushes_total, 1u);
  EXPECT_EQ(s.updates_written_total, 4u);
  EXPECT_EQ(s.backlog_updates, 0u);
  EXPECT_EQ(s.redis_reconnects_total, 7u);
}

// What writers store in Redis: the fingerprint as exactly 16 lowercase hex digits, leading zeros
// kept. About one key in 16 has a fingerprint below 2^60 (a leading 0 digit); the first such key
// of a fixed sequence shows the zero is written.
TEST(SampleWriter, ClientKeyFingerprintHex) {
  EXPECT_EQ(client_key_fingerprint_hex(SipKey{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}),
            "aaf9052f3e9bfe3c");  // tests/unit/dataplane/client_id_test.cpp, KnownValues
  bool leading_zero = false;
  for (uint64_t i = 1; i < 10'000 && !leading_zero; ++i) {
    const SipKey k{i, ~i};
    const std::string hex = client_key_fingerprint_hex(k);
    ASSERT_EQ(hex.size(), 16u) << hex;
    EXPECT_EQ(std::strtoull(hex.c_str(), nullptr, 16), client_key_fingerprint(k)) << hex;
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
    leading_zero = hex[0] == '0';
  }
  EXPECT_TRUE(leading_zero);
}

// The writer files W_c samples under client ids of its key (--client-key-file): the same address
// gets another id under another key, and the key file's 32 hex digits are the key's 16 bytes.
TEST(SampleWriter, ClientIdsUseTheWritersKey) {
  const std::string path = testing::TempDir() + "client_key_test";
  auto write_file = [&](const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write_file("000102030405060708090a0b0c0d0e0f\n");
  SipKey key;
  std::string error;
  ASSERT_TRUE(read_client_key_file(path, key, error)) << error;
  EXPECT_EQ(key.k0, 0x0706050403020100ull);  // SipHash's key bytes, little-endian words
  EXPECT_EQ(key.k1, 0x0f0e0d0c0b0a0908ull);
  for (const char* bad : {"", "0001", "000102030405060708090a0b0c0d0e0fff",
                          "000102030405060708090a0b0c0d0e0g", "00 01 02 03 04 05 06 07 08 09"}) {
    write_file(bad);
    EXPECT_FALSE(read_client_key_file(path, key, error)) << bad;
    EXPECT_NE(error.find("--client-key-file"), std::string::npos) << error;
  }
  EXPECT_FALSE(read_client_key_file(path + ".missing", key, error));
  std::remove(path.c_str());
  // The word "public" names the published key (no file is read).
  key = SipKey{};
  ASSERT_TRUE(read_client_key_file("public", key, error)) << error;
  EXPECT_EQ(key.k0, kPublicClientIdKey.k0);
  EXPECT_EQ(key.k1, kPublicClientIdKey.k1);

  const SipKey k1{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}, k2{1, 2};
  for (const SipKey& k : {k1, k2}) {
    FakeSink sink;
    SampleWriterOptions o = sync_opts();
    o.client_key = k;
    SampleWriter w(sink, o);
    w.tick(0, Wall::time_point{});
    w.add(make(SampleKind::kWc, "198.51.100.1", 10, 101 * kSec));
    w.tick(500 * kSec, Wall::time_point{} + std::chrono::seconds(1));
    ASSERT_EQ(sink.written.size(), 1u);
    const Accumulator& a = sink.written[0].update.acc;
    ASSERT_EQ(a.wc_client_n, 1u);
    EXPECT_EQ(a.wc_client[0].id, client_id(v4("198.51.100.1"), k));
  }
  EXPECT_NE(client_id(v4("198.51.100.1"), k1), client_id(v4("198.51.100.1"), k2));
}

// Admission: a sample stamped more than clock_skew_s beyond the wall clock, a W_c above 65535
// segments or an RTT above 60 s is refused and counted; everything else is taken.
TEST(SampleWriter, RefusesFutureSamplesAndValuesBeyondTheBounds) {
  FakeSink sink;
  SampleWriterOptions o = sync_opts();
  const uint64_t wall = 1'800'000'000 * kSec;
  o.wall_now_ns = [wall] { return wall; };
  SampleWriter w(sink, o);
  EXPECT_TRUE(w.add(make(SampleKind::kWc, "198.51.100.7", 12, wall + 60 * kSec)));
  EXPECT_FALSE(w.add(make(SampleKind::kWc, "198.51.100.7", 12, wall + 61 * kSec)));
  EXPECT_FALSE(w.add(make(SampleKind::kRtt, "198.51.100.7", 1000, UINT64_MAX)));
  EXPECT_TRUE(w.add(make(SampleKind::kWc, "198.51.100.7", 65535, wall - 3600 * kSec)));
  EXPECT_FALSE(w.add(make(SampleKind::kWc, "198.51.100.7", 65536, wall)));
  EXPECT_FALSE(w.add(make(SampleKind::kWc, "198.51.100.7", UINT32_MAX, wall)));
  EXPECT_TRUE(w.add(make(SampleKind::kRtt, "198.51.100.7", 60'000'000, wall)));
  EXPECT_FALSE(w.add(make(SampleKind::kRtt, "198.51.100.7", 60'000'001, wall)));
  const WriterStats st = w.stats();
  EXPECT_EQ(st.samples_added, 3u);
  EXPECT_EQ(st.rejected_future, 2u);
  EXPECT_EQ(st.rejected_wc_bound, 2u);
  EXPECT_EQ(st.rejected_rtt_bound, 1u);
  EXPECT_STREQ(sample_reject_name(SampleReject::kFuture), "future");
}

// Flow records add to the loss figures of the client's prefix, in the bucket of the last packet,
// from their server->client direction only, and only when it carried data; a record stamped
// beyond the wall clock + skew is refused as a future sample is.
TEST(SampleWriter, FlowRecordsAddToTheLossFiguresOfTheirBucket) {
  FakeSink sink;
  SampleWriterOptions o = sync_opts();
  const uint64_t wall = 1'800'000'000 * kSec;
  o.wall_now_ns = [wall] { return wall; };
  SampleWriter w(sink, o);
  auto flow = [](const char* client, uint64_t last_ns, uint64_t bytes, uint16_t flight,
                 uint32_t fast, uint32_t timeout) {
    FlowRecord r;
    r.client = v4(client);
    r.last_ns = last_ns;
    r.s2c.unique_bytes = bytes;
    r.s2c.max_flight_segments = flight;
    r.s2c.loss_events_fast = fast;
    r.s2c.loss_events_timeout = timeout;
    r.c2s.unique_bytes = 500;  // the client's direction: never counted
    r.c2s.loss_events_timeout = 9;
    return r;
  };
  const uint64_t t = wall - 100 * kSec;  // bucket wall - 100 s
  EXPECT_TRUE(w.add_flow(flow("198.51.100.7", t + 1, 2000, 2, 0, 1)));
  EXPECT_TRUE(w.add_flow(flow("198.51.100.9", t + 9 * kSec, 90000, 30, 3, 1)));
  EXPECT_TRUE(w.add_flow(flow("198.51.100.9", t + 10 * kSec, 1000, 3, 0, 0)));  // next bucket
  EXPECT_FALSE(w.add_flow(flow("198.51.100.9", t + 2, 0, 0, 0, 0)));            // no server data
  EXPECT_FALSE(w.add_flow(flow("198.51.100.9", wall + 61 * kSec, 1000, 1, 0, 1)));  // future
  EXPECT_TRUE(w.add_flow(flow("203.0.113.1", t + 3, 1000, 4, 0, 0)));               // another /24
  EXPECT_EQ(w.stats().flows_added, 4u);
  EXPECT_EQ(w.stats().rejected_future, 1u);
  EXPECT_EQ(w.stats().samples_added, 0u);
  EXPECT_EQ(w.pending_keys(), 3u);
  ASSERT_TRUE(w.finish(std::chrono::milliseconds(0)));
  std::map<std::pair<std::string, uint64_t>, LossFigures> got;
  for (const PendingUpdate& u : sink.written) {
    EXPECT_EQ(u.update.acc.wc_count + u.update.acc.rtt_count, 0u);
    EXPECT_EQ(u.update.origin, SampleOrigin::kGateway);
    got[{u.update.prefix.to_string(), u.update.bucket_start_s}] = u.update.acc.loss;
  }
  ASSERT_EQ(got.size(), 3u);
  const uint64_t b = (wall / kSec) - 100;
  // 198.51.100.0/24 in bucket b: two flows, one with a flight of 2 (never 4), events 0+3 fast,
  // 1+1 timeout.
  const LossFigures& first = got[{"198.51.100.0/24", b}];
  EXPECT_EQ(first.flows, 2u);
  EXPECT_EQ(first.never4, 1u);
  EXPECT_EQ(first.fast, 3u);
  EXPECT_EQ(first.timeout, 2u);
  const LossFigures& second = got[{"198.51.100.0/24", b + 10}];
  EXPECT_EQ(second.flows, 1u);
  EXPECT_EQ(second.never4, 1u);  // flight 3
  const LossFigures& other = got[{"203.0.113.0/24", b}];
  EXPECT_EQ(other.flows, 1u);
  EXPECT_EQ(other.never4, 0u);  // flight exactly 4 reached it
}

TEST(SampleWriter, BacklogKeepsFailedUpdatesWithTheirSeqAndIsBounded) {
  FakeSink sink;
  SampleWriter w(sink, sync_opts(5));
  Wall::time_point t{};
  w.tick(0, t);
  sink.down = true;
  // Three flushes of 3 distinct prefixes each while the sink is down: 9 updates, bound 5.
  for (int f = 0; f < 3; ++f) {
    for (int p = 0; p < 3; ++p) {
      std::string addr = "10." + std::to_string(f) + "." + std::to_string(p) + ".1";
      w.add(make(SampleKind::kWc, addr.c_str(), 10, 100 * kSec));
      w.add(make(SampleKind::kRtt, addr.c_str(), 900, 100 * kSec));
    }
    t += std::chrono::seconds(1);
    w.tick(100 * kSec, t);
  }
  WriterStats s = w.stats();
  EXPECT_EQ(s.flushes_total, 3u);
  EXPECT_EQ(s.flush_errors_total, 3u);
  EXPECT_EQ(s.backlog_updates, 5u);
  EXPECT_EQ(s.backlog_dropped_total, 4u);
  EXPECT_EQ(s.samples_dropped_total, 8u);  // 2 samples in each dropped update
  EXPECT_TRUE(sink.written.empty());

  sink.down = false;
  t += std::chrono::seconds(1);
  w.tick(100 * kSec, t);
  s = w.stats();
  EXPECT_EQ(s.backlog_updates, 0u);
  EXPECT_EQ(s.updates_written_total, 5u);
  ASSERT_EQ(sink.written.size(), 5u);
  // Flush 0 assigned seqs 1..3, flush 1 4..6, flush 2 7..9 (assigned on the first try and kept
  // across retries). The oldest were dropped: 1..3 and 4, leaving 5..9 in order.
  int from_flush1 = 0, from_flush2 = 0;
  for (size_t i = 0; i < sink.written.size(); ++i) {
    EXPECT_EQ(sink.written[i].seq, 5 + i);
    const std::string p = sink.written[i].update.prefix.to_string();
    from_flush1 += p.rfind("10.1.", 0) == 0;
    from_flush2 += p.rfind("10.2.", 0) == 0;
  }
  EXPECT_EQ(from_flush1, 2);
  EXPECT_EQ(from_flush2, 3);
}

TEST(SampleWriter, PartialFailureKeepsOnlyTheFailedUpdates) {
  FakeSink sink;
  SampleWriter w(sink, sync_opts());
  Wall::time_point t{};
  w.tick(0, t);
  sink.fail_prefix = "192.0.2.0/24";
  w.add(make(SampleKind::kWc, "192.0.2.1", 10, 100 * kSec));
  w.add(make(SampleKind::kWc, "198.51.100.1", 10, 100 * kSec));
  t += std::chrono::seconds(1);
  w.tick(100 * kSec, t);
  EXPECT_EQ(w.stats().backlog_updates, 1u);
  EXPECT_EQ(sink.written.size(), 1u);
  sink.fail_prefix.clear();
  t += std::chrono::seconds(1);
  w.tick(100 * kSec, t);
  EXPECT_EQ(w.stats().backlog_updates, 0u);
  ASSERT_EQ(sink.written.size(), 2u);
  EXPECT_EQ(sink.written[1].update.prefix.to_string(), "192.0.2.0/24");
  EXPECT_EQ(w.stats().updates_written_total, 2u);
}

TEST(SampleWriter, BackgroundFlushAndFinish) {
  FakeSink sink;
  SampleWriterOptions o = sync_opts();
  o.background = true;
  SampleWriter w(sink, o);
  w.add(make(SampleKind::kWc, "192.0.2.1", 10, 100 * kSec));
  EXPECT_TRUE(w.finish(std::chrono::seconds(5)));
  EXPECT_EQ(sink.written.size(), 1u);
  EXPECT_EQ(w.stats().updates_written_total, 1u);
}

}  // namespace
}  // namespace spand
