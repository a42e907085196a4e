// EstimatesCore with a fake store and clock: parsing, verdicts, cwnd_opt, limits, cache, Report.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "fakes.hpp"
#include "service/estimates_core.hpp"

namespace spand {
namespace {

using test::FakeAsyncReader;
using test::FakeClock;
using test::FakeSink;
using test::FakeStore;

constexpr uint64_t kSecondNs = 1'000'000'000;

IpAddr v4(const char* text) {
  uint8_t b[4];
  EXPECT_EQ(inet_pton(AF_INET, text, b), 1);
  return IpAddr::from_v4(b);
}
IpAddr v6(const char* text) {
  uint8_t b[16];
  EXPECT_EQ(inet_pton(AF_INET6, text, b), 1);
  return IpAddr::from_v6(b);
}

// An accumulator built sample by sample, independent of how the store sums.
Accumulator window_of(const std::vector<uint32_t>& wc, const std::vector<uint32_t>& rtt_us,
                      uint64_t newest_ts_ns) {
  Accumulator a;
  for (uint32_t w : wc) {
    a.wc_count++;
    a.wc_sum += w;
    a.wc_sumsq += double(w) * w;
  }
  for (uint32_t r : rtt_us) {
    a.rtt_count++;
    a.rtt_sum_us += r;
    a.rtt_min_us = std::min(a.rtt_min_us, r);
  }
  a.newest_ts_ns = newest_ts_ns;
  return a;
}

struct CoreTest : ::testing::Test {
  CoreTest() : clock(130 * kSecondNs) { opts.cache_ttl_ms = 0; }
  EstimatesCore make() { return EstimatesCore(store, clock, opts, &sink, &cache_clock); }
  FakeStore store;
  FakeClock clock;
  FakeClock cache_clock{1};
  FakeSink sink;
  CoreOptions opts;
};

v1::GetRequest req(const std::string& address) {
  v1::GetRequest r;
  r.set_address(address);
  return r;
}

TEST_F(CoreTest, UnparseableAddressesAreInvalidArgument) {
  EstimatesCore core = make();
  for (const char* bad : {"", "hello", "1.2.3", "1.2.3.4.5", "256.1.1.1", "2001:db8::g", "1.2.3.4/",
                          "1.2.3.4/abc", "1.2.3.4/-1", "1.2.3.4/24x", " 1.2.3.4", "1.2.3.4/24/8"}) {
    v1::Estimate out;
    const grpc::Status st = core.get(req(bad), out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "'" << bad << "'";
    EXPECT_FALSE(st.error_message().empty()) << bad;
  }
  EXPECT_EQ(store.reads(), 0u);
}

TEST_F(CoreTest, PrefixLengthOutOfRange) {
  EstimatesCore core = make();
  struct Case {
    const char* address;
    const char* message_part;
  };
  for (const Case& c :
       {Case{"198.51.100.0/33", "out of range for IPv4"}, Case{"198.51.100.0/300", "not a number"},
        Case{"2001:db8::/129", "out of range for IPv6"},
        Case{"198.51.0.0/16", "wider than the store's /24"},
        Case{"2001:db8::/32", "wider than the store's /48"}}) {
    v1::Estimate out;
    const grpc::Status st = core.get(req(c.address), out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.address;
    EXPECT_NE(st.error_message().find(c.message_part), std::string::npos)
        << c.address << ": " << st.error_message();
  }
}

TEST_F(CoreTest, AddressesMapToTheConfiguredPrefix) {
  EstimatesCore core = make();
  for (const char* a : {"198.51.100.7", "198.51.100.0/24", "198.51.100.200/32", "198.51.100.64/26",
                        "::ffff:198.51.100.9"}) {
    v1::Estimate out;
    ASSERT_TRUE(core.get(req(a), out).ok()) << a;
    EXPECT_EQ(out.prefix(), "198.51.100.0/24") << a;
  }
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("2001:db8:1:2::5"), out).ok());
  EXPECT_EQ(out.prefix(), "2001:db8:1::/48");
  ASSERT_TRUE(core.get(req("2001:db8:1:ffff::/64"), out).ok());
  EXPECT_EQ(out.prefix(), "2001:db8:1::/48");
}

TEST_F(CoreTest, ConfiguredPrefixLengthsAreUsed) {
  opts.prefix.v4_len = 16;
  opts.prefix.v6_len = 32;
  EstimatesCore core = make();
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.7"), out).ok());
  EXPECT_EQ(out.prefix(), "198.51.0.0/16");
  ASSERT_TRUE(core.get(req("198.51.0.0/16"), out).ok());
  ASSERT_TRUE(core.get(req("2001:db8:1:2::5"), out).ok());
  EXPECT_EQ(out.prefix(), "2001:db8::/32");
}

TEST_F(CoreTest, VerdictFollowsMinSamples) {
  opts.min_samples = 5;
  EstimatesCore core = make();
  const Prefix p4 = prefix_of(v4("198.51.100.1"), opts.prefix);
  const Prefix p5 = prefix_of(v4("203.0.113.1"), opts.prefix);
  store.set(p4, window_of({10, 10, 10, 10}, {}, 100 * kSecondNs));
  store.set(p5, window_of({10, 10, 10, 10, 10}, {}, 100 * kSecondNs));
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.1"), out).ok());
  EXPECT_EQ(out.verdict(), v1::SLOW_START);
  EXPECT_EQ(out.samples(), 4u);
  ASSERT_TRUE(core.get(req("203.0.113.1"), out).ok());
  EXPECT_EQ(out.verdict(), v1::USE_ESTIMATE);
  EXPECT_EQ(out.samples(), 5u);
  ASSERT_TRUE(core.get(req("192.0.2.1"), out).ok());
  EXPECT_EQ(out.verdict(), v1::SLOW_START);
  EXPECT_EQ(out.samples(), 0u);
  EXPECT_EQ(core.use_estimate_count(), 1u);
  EXPECT_EQ(core.slow_start_count(), 2u);
}

// Get answers the lower median of per-client means; the counters say how each answer's W_c was
// made: a window of samples added with their clients (tables) is client_median, one of bare sums
// (window_of above, as buckets written before the table read) is mean, and one with more clients
// than the table keeps counts as left out.
TEST_F(CoreTest, WcIsTheClientMedianAndCountedByMethod) {
  opts.min_clients = 2;
  EstimatesCore core = make();
  Accumulator robust;
  auto add = [&](Accumulator& a, const char* client, uint32_t wc) {
    Sample s;
    s.kind = SampleKind::kWc;
    s.client = v4(client);
    s.value = wc;
    s.ts_ns = 100 * kSecondNs;
    a.add(s);
  };
  for (const char* c : {"198.51.100.1", "198.51.100.2", "198.51.100.3"}) add(robust, c, 10);
  for (int i = 0; i < 6; ++i) add(robust, "198.51.100.66", 5255);  // one forging client
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix), robust);
  store.set(prefix_of(v4("203.0.113.1"), opts.prefix),
            window_of({10, 10, 10, 10, 10}, {}, 100 * kSecondNs));
  Accumulator crowd;
  for (int h = 1; h <= 20; ++h) add(crowd, ("192.0.2." + std::to_string(h)).c_str(), 12);
  store.set(prefix_of(v4("192.0.2.1"), opts.prefix), crowd);
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.1"), out).ok());
  EXPECT_DOUBLE_EQ(out.wc_segments(), 10.0);  // means 10, 10, 10, 5255: the second smallest
  EXPECT_EQ(out.verdict(), v1::USE_ESTIMATE);
  EXPECT_EQ(core.wc_by_median(), 1u);
  ASSERT_TRUE(core.get(req("203.0.113.1"), out).ok());
  EXPECT_DOUBLE_EQ(out.wc_segments(), 10.0);
  EXPECT_EQ(core.wc_by_mean(), 1u);
  ASSERT_TRUE(core.get(req("192.0.2.1"), out).ok());
  EXPECT_DOUBLE_EQ(out.wc_segments(), 12.0);
  EXPECT_EQ(core.wc_by_median(), 2u);
  EXPECT_EQ(core.wc_clients_left_out(), 1u);
  ASSERT_TRUE(core.get(req("2001:db8::1"), out).ok());  // no W_c samples: neither
  EXPECT_EQ(core.wc_by_median() + core.wc_by_mean(), 3u);
}

TEST_F(CoreTest, NoSamplesIsSlowStartEvenWithMinSamplesZero) {
  opts.min_samples = 0;
  EstimatesCore core = make();
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("192.0.2.1"), out).ok());
  EXPECT_EQ(out.verdict(), v1::SLOW_START);
}

TEST_F(CoreTest, EstimateFields) {
  EstimatesCore core = make();
  // W_c 10..18 step 2: mean 14, sample variance (16 + 4 + 0 + 4 + 16) / (5 - 1) = 10.
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix),
            window_of({10, 12, 14, 16, 18}, {10'000, 20'000, 30'000}, 100 * kSecondNs));
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.1"), out).ok());
  EXPECT_EQ(out.samples(), 5u);
  EXPECT_DOUBLE_EQ(out.wc_segments(), 14.0);
  EXPECT_NEAR(out.wc_stddev(), std::sqrt(10.0), 1e-9);
  EXPECT_EQ(out.rtt_samples(), 3u);
  EXPECT_DOUBLE_EQ(out.rtt_ms(), 20.0);
  EXPECT_DOUBLE_EQ(out.min_rtt_ms(), 10.0);
  EXPECT_DOUBLE_EQ(out.age_s(), 30.0);              // clock 130 s, newest sample 100 s
  EXPECT_EQ(store.last_now_ns(), 130 * kSecondNs);  // the window ends at the service clock
}

TEST_F(CoreTest, CwndOptOnlyWithTransferBytes) {
  EstimatesCore core = make();
  // The paper's worked example (Fig. 4): b = 1, W_c = 10, F = 11 gives m = 9, cwnd_opt = 5.
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix),
            window_of({10, 10, 10, 10, 10}, {20'000}, 100 * kSecondNs));
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.1"), out).ok());
  EXPECT_FALSE(out.has_cwnd_opt());
  EXPECT_FALSE(out.has_pacing_rate_bps());

  v1::GetRequest r = req("198.51.100.1");
  r.set_transfer_bytes(11 * 1460);  // default mss 1460: F = 11
  ASSERT_TRUE(core.get(r, out).ok());
  ASSERT_TRUE(out.has_cwnd_opt());
  EXPECT_EQ(out.cwnd_opt(), 5u);
  // 5 segments * 1460 B * 8 bit per 20 ms.
  EXPECT_EQ(out.pacing_rate_bps(), 5u * 1460 * 8 * 50);

  // One byte more is 12 segments: m = 9 (9 + 10 >= 12), Delta = floor((19 - 12) / 2) = 3.
  r.set_transfer_bytes(11 * 1460 + 1);
  ASSERT_TRUE(core.get(r, out).ok());
  EXPECT_EQ(out.cwnd_opt(), 6u);

  // mss and b from the request: 11 segments of 1000 B with b = 2. F_E = 2 * 45 + 21 = 111;
  // m = 10 since 2 * 10 = 20 >= 11; Delta = floor((20 - 11) / (2 * 1)) = 4; cwnd_opt = 6.
  r.set_transfer_bytes(11'000);
  r.set_mss(1000);
  r.set_acked_per_ack(2);
  ASSERT_TRUE(core.get(r, out).ok());
  EXPECT_EQ(out.cwnd_opt(), 6u);
  EXPECT_EQ(out.pacing_rate_bps(), 6u * 1000 * 8 * 50);
}

// The service caps cwnd_opt (issue 12: a forged W_c of 5255 gave cwnd_opt 685).
TEST_F(CoreTest, CwndOptIsCapped) {
  opts.max_cwnd_opt = 64;
  EstimatesCore core = make();
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix),
            window_of({5255, 5255, 5255, 5255, 5255}, {20'000}, 100 * kSecondNs));
  v1::GetRequest r = req("198.51.100.1");
  r.set_transfer_bytes(1'000'000);
  v1::Estimate out;
  ASSERT_TRUE(core.get(r, out).ok());
  EXPECT_EQ(out.cwnd_opt(), 64u);
  opts.max_cwnd_opt = 0;  // no cap: the window's answer
  EstimatesCore uncapped = make();
  ASSERT_TRUE(uncapped.get(r, out).ok());
  EXPECT_GT(out.cwnd_opt(), 64u);
}

TEST_F(CoreTest, CwndOptIsZeroForSlowStart) {
  EstimatesCore core = make();
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix), window_of({10}, {20'000}, 1));
  v1::GetRequest r = req("198.51.100.1");
  r.set_transfer_bytes(100'000);
  v1::Estimate out;
  ASSERT_TRUE(core.get(r, out).ok());
  EXPECT_EQ(out.verdict(), v1::SLOW_START);
  ASSERT_TRUE(out.has_cwnd_opt());
  EXPECT_EQ(out.cwnd_opt(), 0u);
  EXPECT_EQ(out.pacing_rate_bps(), 0u);
}

TEST_F(CoreTest, BadTransferParameters) {
  EstimatesCore core = make();
  v1::GetRequest r = req("198.51.100.1");
  r.set_transfer_bytes(1000);
  r.set_mss(0);
  v1::Estimate out;
  EXPECT_EQ(core.get(r, out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r.clear_mss();
  r.set_acked_per_ack(0);
  EXPECT_EQ(core.get(r, out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CoreTest, BatchLimitAndOrder) {
  EstimatesCore core = make();
  v1::BatchGetRequest batch;
  for (size_t i = 0; i < kMaxBatch + 1; ++i) {
    batch.add_requests()->set_address("10.0." + std::to_string(i % 250) + ".1");
  }
  v1::BatchGetResponse out;
  grpc::Status st = core.batch_get(batch, out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("1000"), std::string::npos) << st.error_message();
  EXPECT_EQ(store.reads(), 0u);

  batch.mutable_requests()->RemoveLast();
  ASSERT_TRUE(core.batch_get(batch, out).ok());
  ASSERT_EQ(out.estimates_size(), int(kMaxBatch));
  EXPECT_EQ(out.estimates(0).prefix(), "10.0.0.0/24");
  EXPECT_EQ(out.estimates(7).prefix(), "10.0.7.0/24");
}

TEST_F(CoreTest, BatchWithOneBadAddressFailsWhole) {
  EstimatesCore core = make();
  v1::BatchGetRequest batch;
  for (const char* a : {"10.0.0.1", "10.0.1.1", "10.0.2.1", "not-an-address"}) {
    batch.add_requests()->set_address(a);
  }
  v1::BatchGetResponse out;
  const grpc::Status st = core.batch_get(batch, out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("requests[3]"), std::string::npos) << st.error_message();
  EXPECT_EQ(out.estimates_size(), 0);
  EXPECT_EQ(store.reads(), 0u);
}

// "1.2.3.4\0evil" used to pass as 1.2.3.4 (inet_pton stops at the NUL).
TEST_F(CoreTest, AddressWithAnEmbeddedNulIsRejected) {
  EstimatesCore core = make();
  v1::Estimate out;
  EXPECT_EQ(core.get(req(std::string("1.2.3.4\0evil", 12)), out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ReportSummary summary;
  v1::ReportSample m;
  m.set_client_address(std::string("198.51.100.7\0x", 14));
  m.set_wc_segments(10);
  EXPECT_FALSE(core.report(m, summary));
  EXPECT_TRUE(sink.samples.empty());
}

// Per-client Report limit (issue 12: 100,000 /24s through Report in 9 s): a caller gets bursts
// of twice its rate, then its rate; another caller is not affected; in-process calls (no caller)
// are not limited.
TEST_F(CoreTest, ReportIsRateLimitedPerCaller) {
  opts.report_rate_per_s = 10;
  EstimatesCore core = make();
  v1::ReportSummary summary;
  v1::ReportSample m;
  m.set_client_address("198.51.100.7");
  m.set_wc_segments(10);
  int ok = 0;
  for (int i = 0; i < 50; ++i) ok += core.report(m, summary, "ipv4:10.0.0.5");
  EXPECT_EQ(ok, 20);  // the burst
  EXPECT_EQ(core.report_rejected(ReportReject::kRateLimited), 30u);
  EXPECT_TRUE(core.report(m, summary, "ipv4:10.0.0.6"));
  cache_clock.advance_ms(500);  // 5 tokens
  ok = 0;
  for (int i = 0; i < 10; ++i) ok += core.report(m, summary, "ipv4:10.0.0.5");
  EXPECT_EQ(ok, 5);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(core.report(m, summary));
}

// A Report names its own client addresses (issue 12): one caller may add at most
// report_max_clients_per_prefix distinct clients to one prefix per window, so it cannot give a
// prefix the clients needed to outvote the W_c median. Clients already admitted keep reporting;
// other prefixes, other callers and the next window are not affected.
TEST_F(CoreTest, ReportCapsTheDistinctClientsOneCallerAddsPerPrefixAndWindow) {
  opts.report_rate_per_s = 0;
  opts.report_max_clients_per_prefix = 4;
  opts.window_s = 300;
  EstimatesCore core = make();
  v1::ReportSummary summary;
  auto report = [&](const std::string& addr, const std::string& caller) {
    v1::ReportSample m;
    m.set_client_address(addr);
    m.set_wc_segments(1);
    return core.report(m, summary, caller);
  };
  int ok = 0;
  for (int h = 1; h <= 20; ++h) ok += report("198.51.100." + std::to_string(h), "cert:forger");
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(core.report_rejected(ReportReject::kTooManyClients), 16u);
  EXPECT_NE(summary.first_error().find("client addresses of this prefix"), std::string::npos)
      << summary.first_error();
  EXPECT_TRUE(report("198.51.100.3", "cert:forger"));    // admitted before: still accepted
  EXPECT_FALSE(report("198.51.100.99", "cert:forger"));  // a fifth one: refused
  EXPECT_TRUE(report("203.0.113.5", "cert:forger"));     // another prefix
  EXPECT_TRUE(report("198.51.100.99", "cert:agent"));    // another caller
  EXPECT_TRUE(report("198.51.100.99", ""));              // in-process: no cap
  std::set<std::string> clients;
  for (const Sample& s : sink.samples) clients.insert(addr_to_string(s.client));
  EXPECT_EQ(clients.count("198.51.100.5"), 0u);  // refused samples never reach the writer
  clock.set(clock.now_ns() + 300 * kSecondNs);   // the next window
  EXPECT_TRUE(report("198.51.100.99", "cert:forger"));
  EXPECT_EQ(core.report_rejected(ReportReject::kTooManyClients), 17u);

  opts.report_max_clients_per_prefix = 0;  // off
  EstimatesCore open = make();
  v1::ReportSample m;
  m.set_wc_segments(1);
  for (int h = 1; h <= 20; ++h) {
    m.set_client_address("198.51.100." + std::to_string(h));
    EXPECT_TRUE(open.report(m, summary, "cert:forger"));
  }
}

TEST_F(CoreTest, StoreFailureIsUnavailable) {
  EstimatesCore core = make();
  store.set_fail(true);
  v1::Estimate out;
  const grpc::Status st = core.get(req("198.51.100.1"), out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The store's own error (in production: "redis 10.0.0.5:6379: down, ...") stays inside.
  EXPECT_EQ(st.error_message().find("connection refused"), std::string::npos);
  EXPECT_EQ(st.error_message(), "estimate store unavailable; retry later");
  v1::TopResponse top;
  EXPECT_EQ(core.top(v1::TopRequest{}, top).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(CoreTest, CacheServesWithinTtl) {
  opts.cache_ttl_ms = 1000;
  EstimatesCore core = make();
  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.1"), out).ok());
  ASSERT_TRUE(core.get(req("198.51.100.2"), out).ok());  // same /24
  EXPECT_EQ(store.reads(), 1u);
  cache_clock.advance_ms(999);
  ASSERT_TRUE(core.get(req("198.51.100.3"), out).ok());
  EXPECT_EQ(store.reads(), 1u);
  cache_clock.advance_ms(1);
  ASSERT_TRUE(core.get(req("198.51.100.3"), out).ok());
  EXPECT_EQ(store.reads(), 2u);
  ASSERT_TRUE(core.get(req("203.0.113.1"), out).ok());  // another prefix misses
  EXPECT_EQ(store.reads(), 3u);
}

// With an asynchronous reader (StorePool's role) answers are completed on the reader's thread;
// a BatchGet queues all its cache misses in one call, and keeps request order.
TEST_F(CoreTest, AsyncReaderGetAndBatchGet) {
  opts.cache_ttl_ms = 1000;
  FakeAsyncReader reader(store);
  EstimatesCore core(store, clock, opts, &sink, &cache_clock, &reader);
  const Prefix a = prefix_of(v4("198.51.100.1"), opts.prefix);
  const Prefix b = prefix_of(v4("203.0.113.1"), opts.prefix);
  store.set(a, window_of({10, 10, 10, 10, 10, 10}, {20000}, 100 * kSecondNs));
  store.set(b, window_of({7}, {}, 100 * kSecondNs));

  v1::Estimate out;
  ASSERT_TRUE(core.get(req("198.51.100.9"), out).ok());
  EXPECT_EQ(out.prefix(), "198.51.100.0/24");
  EXPECT_EQ(out.samples(), 6u);
  EXPECT_EQ(out.verdict(), v1::USE_ESTIMATE);
  EXPECT_EQ(reader.calls(), 1u);
  EXPECT_EQ(reader.completed_off_thread(), 1u);

  // a is cached now: the batch reads b and 192.0.2.0/24 only, in one read_async call.
  v1::BatchGetRequest batch;
  for (const char* x : {"203.0.113.5", "198.51.100.2", "192.0.2.1", "198.51.100.3"}) {
    v1::GetRequest* r = batch.add_requests();
    r->set_address(x);
    r->set_transfer_bytes(65536);
  }
  v1::BatchGetResponse resp;
  ASSERT_TRUE(core.batch_get(batch, resp).ok());
  EXPECT_EQ(reader.calls(), 2u);
  EXPECT_EQ(reader.completed_off_thread(), 3u);
  ASSERT_EQ(resp.estimates_size(), 4);
  EXPECT_EQ(resp.estimates(0).prefix(), "203.0.113.0/24");
  EXPECT_EQ(resp.estimates(0).samples(), 1u);
  EXPECT_EQ(resp.estimates(1).prefix(), "198.51.100.0/24");
  EXPECT_EQ(resp.estimates(1).samples(), 6u);
  EXPECT_TRUE(resp.estimates(1).has_cwnd_opt());
  EXPECT_GT(resp.estimates(1).cwnd_opt(), 0u);
  EXPECT_EQ(resp.estimates(2).prefix(), "192.0.2.0/24");
  EXPECT_EQ(resp.estimates(2).samples(), 0u);
  EXPECT_EQ(resp.estimates(3).samples(), 6u);
  EXPECT_EQ(core.cache_hits(), 2u);

  // One failed read fails the whole batch with UNAVAILABLE and no estimates.
  cache_clock.advance_ms(1000);
  reader.fail_prefix(b);
  resp.Clear();
  const grpc::Status st = core.batch_get(batch, resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The store's own error stays inside (it names the Redis node in production).
  EXPECT_EQ(st.error_message().find("injected failure"), std::string::npos) << st.error_message();
  EXPECT_EQ(resp.estimates_size(), 0);
  EXPECT_EQ(core.get(req("203.0.113.1"), out).error_code(), grpc::StatusCode::UNAVAILABLE);

  // An empty batch needs no read.
  v1::BatchGetRequest empty;
  resp.Clear();
  const uint64_t calls = reader.calls();
  ASSERT_TRUE(core.batch_get(empty, resp).ok());
  EXPECT_EQ(resp.estimates_size(), 0);
  EXPECT_EQ(reader.calls(), calls);
}

TEST_F(CoreTest, CacheIsBounded) {
  opts.cache_ttl_ms = 1000;
  opts.cache_max_entries = 32;  // 2 per shard
  EstimatesCore core = make();
  v1::Estimate out;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(core.get(req("10.1." + std::to_string(i) + ".1"), out).ok());
  }
  EXPECT_EQ(store.reads(), 200u);
  // A bounded cache cannot hold all 200: asking again must reach the store for most of them.
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(core.get(req("10.1." + std::to_string(i) + ".1"), out).ok());
  }
  EXPECT_GE(store.reads(), 200u + 200u - 32u);
}

TEST_F(CoreTest, TopLimits) {
  EstimatesCore core = make();
  std::vector<PrefixActivity> rows;
  for (int i = 0; i < 20; ++i) {
    rows.push_back({prefix_of(v4(("10.2." + std::to_string(i) + ".0").c_str()), opts.prefix),
                    uint64_t(100 - i)});
  }
  store.set_top(rows);
  v1::TopResponse out;
  ASSERT_TRUE(core.top(v1::TopRequest{}, out).ok());
  ASSERT_EQ(out.prefixes_size(), int(kDefaultTop));
  EXPECT_EQ(out.prefixes(0).prefix(), "10.2.0.0/24");
  EXPECT_EQ(out.prefixes(0).samples(), 100u);
  v1::TopRequest big;
  big.set_limit(kMaxTop + 1);
  EXPECT_EQ(core.top(big, out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CoreTest, ReportHandsAgentSamplesToTheSink) {
  EstimatesCore core = make();
  v1::ReportSummary summary;
  v1::ReportSample m;
  m.set_client_address("198.51.100.7");
  m.set_wc_segments(12);
  m.set_rtt_us(15'000);
  m.set_timestamp_ns(0);  // "now" in the service clock
  EXPECT_TRUE(core.report(m, summary));
  m.set_client_address("2001:db8::1");
  m.clear_rtt_us();
  m.set_timestamp_ns(99 * kSecondNs);
  EXPECT_TRUE(core.report(m, summary));
  m.set_client_address("nope");
  EXPECT_FALSE(core.report(m, summary));
  m.set_client_address("198.51.100.7");
  m.clear_wc_segments();
  EXPECT_FALSE(core.report(m, summary));

  EXPECT_EQ(summary.accepted(), 3u);
  EXPECT_EQ(summary.rejected(), 2u);
  EXPECT_NE(summary.first_error().find("client_address"), std::string::npos);
  ASSERT_EQ(sink.samples.size(), 3u);
  EXPECT_EQ(sink.samples[0].kind, SampleKind::kWc);
  EXPECT_EQ(sink.samples[0].value, 12u);
  EXPECT_EQ(sink.samples[0].origin, SampleOrigin::kAgent);
  EXPECT_EQ(sink.samples[0].client, v4("198.51.100.7"));
  EXPECT_EQ(sink.samples[0].ts_ns, 130 * kSecondNs);
  EXPECT_EQ(sink.samples[1].kind, SampleKind::kRtt);
  EXPECT_EQ(sink.samples[1].value, 15'000u);
  EXPECT_EQ(sink.samples[2].client, v6("2001:db8::1"));
  EXPECT_EQ(sink.samples[2].ts_ns, 99 * kSecondNs);
}

// Time sanity and bounds: with the service clock at 130 s, window 300 s and skew 60 s, a
// timestamp beyond 190 s (2^64 - 1 moved the store's clock before) or below -170 s is rejected
// and counted by reason, as are W_c above 65535 and RTT above 60 s; nothing reaches the sink.
TEST_F(CoreTest, ReportRejectsTimesOutsideTheWindowAndValuesBeyondTheBounds) {
  opts.window_s = 100;
  EstimatesCore core = make();
  v1::ReportSummary summary;
  v1::ReportSample m;
  m.set_client_address("198.51.100.7");
  m.set_wc_segments(1);
  m.set_timestamp_ns(UINT64_MAX);
  EXPECT_FALSE(core.report(m, summary));
  EXPECT_NE(summary.first_error().find("ahead of the service clock"), std::string::npos);
  m.set_timestamp_ns(191 * kSecondNs);
  EXPECT_FALSE(core.report(m, summary));
  m.set_timestamp_ns(190 * kSecondNs);
  EXPECT_TRUE(core.report(m, summary));
  m.set_timestamp_ns(29 * kSecondNs);  // 101 s before the clock, window 100 s
  EXPECT_FALSE(core.report(m, summary));
  m.set_timestamp_ns(0);
  m.set_wc_segments(65536);
  EXPECT_FALSE(core.report(m, summary));
  m.set_wc_segments(0);
  m.set_rtt_us(60'000'001);
  EXPECT_FALSE(core.report(m, summary));
  m.set_rtt_us(60'000'000);
  EXPECT_TRUE(core.report(m, summary));
  EXPECT_EQ(summary.accepted(), 2u);
  EXPECT_EQ(summary.rejected(), 5u);
  EXPECT_EQ(core.report_rejected(ReportReject::kFuture), 2u);
  EXPECT_EQ(core.report_rejected(ReportReject::kTooOld), 1u);
  EXPECT_EQ(core.report_rejected(ReportReject::kWcBound), 1u);
  EXPECT_EQ(core.report_rejected(ReportReject::kRttBound), 1u);
  ASSERT_EQ(sink.samples.size(), 2u);
  EXPECT_EQ(sink.samples[0].ts_ns, 190 * kSecondNs);

  clock.set(0);  // no capture yet: no time to put a sample at
  m.set_timestamp_ns(0);
  EXPECT_FALSE(core.report(m, summary));
  EXPECT_EQ(core.report_rejected(ReportReject::kNoClock), 1u);
}

TEST_F(CoreTest, ReportWithoutSinkIsRejected) {
  EstimatesCore core(store, clock, opts, nullptr);
  EXPECT_FALSE(core.can_report());
}

}  // namespace
}  // namespace spand
