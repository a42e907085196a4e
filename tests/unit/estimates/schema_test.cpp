#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "estimates/redis_schema.hpp"

namespace spand {
namespace {

Prefix v4_prefix(const char* addr, uint8_t len) {
  uint8_t raw[4];
  inet_pton(AF_INET, addr, raw);
  return prefix_with_len(IpAddr::from_v4(raw), len);
}

TEST(Schema, KeysShareThePrefixHashTag) {
  Prefix p = v4_prefix("198.51.100.77", 24);
  EXPECT_EQ(window_key(p), "spand:{198.51.100.0/24}:w");
  EXPECT_EQ(bucket_field(1700000010), "1700000010");
  EXPECT_EQ(activity_key(1700000010), "spand:{g}:act:1700000010");
  EXPECT_EQ(std::string(kClockKey), "spand:{g}:clock");
}

TEST(Schema, KeyPrefixComesBeforeTheHashTag) {
  Prefix p = v4_prefix("198.51.100.77", 24);
  EXPECT_EQ(window_key(p, "blue"), "blue:{198.51.100.0/24}:w");
  EXPECT_EQ(activity_key(1700000010, "blue"), "blue:{g}:act:1700000010");
  EXPECT_EQ(clock_key("blue"), "blue:{g}:clock");
  EXPECT_EQ(clock_key(), std::string(kClockKey));
  EXPECT_EQ(top_scratch_key("a.b-c_d:e"), "a.b-c_d:e:{g}:top:scratch");
  std::string e;
  EXPECT_TRUE(valid_key_prefix("spand-staging", e));
  EXPECT_FALSE(valid_key_prefix("", e));
  EXPECT_FALSE(valid_key_prefix("a{b}", e));  // would move the hash tag
  EXPECT_NE(e.find("a{b}"), std::string::npos) << e;
  EXPECT_FALSE(valid_key_prefix("with space", e));
  EXPECT_FALSE(valid_key_prefix(std::string(65, 'x'), e));
  EXPECT_TRUE(valid_key_prefix(std::string(64, 'x'), e));
}

TEST(Schema, WindowBucketsCoverTheWindowEndingNow) {
  // now = 1000.5 s, S = 300, bucket 10: buckets 1000, 990, ..., 710 (30 of them).
  auto b = window_buckets(1'000'500'000'000ULL, 300, 10);
  ASSERT_EQ(b.size(), 30u);
  EXPECT_EQ(b.front(), 1000u);
  EXPECT_EQ(b.back(), 710u);
  // A window that is not a multiple of the bucket rounds up to whole buckets.
  EXPECT_EQ(window_buckets(1'000'000'000'000ULL, 25, 10).size(), 3u);
  // Near time zero there are fewer buckets, never a wrap-around.
  auto early = window_buckets(15'000'000'000ULL, 300, 10);
  ASSERT_EQ(early.size(), 2u);
  EXPECT_EQ(early[1], 0u);
}

TEST(Schema, NoSampleOlderThanTheWindowIsInside) {
  // For every sample age from 0 to 2S in 0.5 s steps and several "now" phases inside a bucket:
  // age >= S is never included; age < S - bucket_s is always included.
  const uint32_t window_s = 300, bucket_s = 10;
  for (uint64_t now_ms : {1'000'000ULL, 1'004'999ULL, 1'009'999ULL}) {
    uint64_t now_ns = now_ms * 1'000'000ULL;
    auto buckets = window_buckets(now_ns, window_s, bucket_s);
    for (uint64_t age_ms = 0; age_ms <= 2 * window_s * 1000; age_ms += 500) {
      uint64_t ts_ns = now_ns - age_ms * 1'000'000ULL;
      uint64_t b = bucket_start_of(ts_ns, bucket_s);
      bool inside = std::find(buckets.begin(), buckets.end(), b) != buckets.end();
      if (age_ms >= window_s * 1000ULL) {
        EXPECT_FALSE(inside) << now_ms << " " << age_ms;
      }
      if (age_ms < (window_s - bucket_s) * 1000ULL) {
        EXPECT_TRUE(inside) << now_ms << " " << age_ms;
      }
    }
  }
}

TEST(Schema, ParseCidr) {
  Prefix p;
  ASSERT_TRUE(parse_cidr("198.51.100.0/24", p));
  EXPECT_EQ(p, v4_prefix("198.51.100.0", 24));
  ASSERT_TRUE(parse_cidr("2001:db8:1::/48", p));
  EXPECT_EQ(p.to_string(), "2001:db8:1::/48");
  EXPECT_FALSE(parse_cidr("198.51.100.7/24", p));  // host bits set
  EXPECT_FALSE(parse_cidr("198.51.100.0/33", p));
  EXPECT_FALSE(parse_cidr("198.51.100.0", p));
  EXPECT_FALSE(parse_cidr("nonsense/8", p));
  EXPECT_FALSE(parse_cidr("10.0.0.0/", p));
}

TEST(Schema, FormatDoubleRoundTrips) {
  for (double v : {0.0, 1.0, 123456789.0, 0.1, 1e-9, 9007199254740991.0, 2.5e11}) {
    EXPECT_EQ(std::strtod(format_double(v).c_str(), nullptr), v);
  }
  EXPECT_EQ(format_double(42), "42");
}

// The bucket value: nine sums, then the W_c clients mask, then created_s (always last). A value
// written before the mask existed (nine sums and created_s) reads with no mask.
TEST(Schema, BucketValueWithAndWithoutTheClientsMask) {
  Accumulator acc;
  ASSERT_TRUE(
      add_bucket_value("3 54 1106 4 81250 18250 1700000017123456789 7 0 5 1763776510", acc));
  EXPECT_EQ(acc.wc_count, 3u);
  EXPECT_EQ(acc.newest_ts_ns, 1700000017123456789u);
  EXPECT_EQ(acc.wc_clients, 5u);
  Accumulator old;
  ASSERT_TRUE(add_bucket_value("3 54 1106 4 81250 18250 1700000017123456789 7 0 1763776510", old));
  EXPECT_EQ(old.wc_count, 3u);
  EXPECT_EQ(old.wc_clients, 0u);
  ASSERT_TRUE(add_bucket_value("1 2 4 0 0 0 1700000017123456789 1 0 4294967295 1763776510", acc));
  EXPECT_EQ(acc.wc_clients, 0xffffffffu);
}

// The RTT histogram between the mask and created_s (since 2026-11-24): read into rtt_hist; a
// value without it still reads (no histogram: rtt_hist_count stays below rtt_count); a
// malformed histogram makes the whole value malformed.
TEST(Schema, BucketValueWithTheRttHistogram) {
  Accumulator w;
  for (uint32_t us : {18'250u, 20'000u, 20'000u, 25'500u}) {
    Sample s;
    s.kind = SampleKind::kRtt;
    s.value = us;
    w.add(s);
  }
  // 18250 and 20000 us: highest bit 14, next two bits 00 (16384 <= v < 20480) -> bin
  // 1 + 4 x (14 - 4) + 0 = 41; 25500: next bits 10 (24576 <= 25500 < 28672) -> bin 43.
  EXPECT_EQ(format_rtt_hist(w), "41:3,43:1");
  EXPECT_EQ(format_rtt_hist(Accumulator{}), "0:0");
  Accumulator acc;
  ASSERT_TRUE(add_bucket_value(
      "3 54 1106 4 81750 18250 1700000017123456789 7 0 5 41:3,43:1 1763776510", acc));
  EXPECT_EQ(acc.wc_clients, 5u);
  EXPECT_EQ(acc.rtt_hist_count, 4u);
  EXPECT_EQ(acc.rtt_hist[41], 3u);
  EXPECT_EQ(acc.rtt_hist[43], 1u);
  EXPECT_GT(acc.rtt_median_us(), 0.0);
  Accumulator legacy;
  ASSERT_TRUE(
      add_bucket_value("3 54 1106 4 81750 18250 1700000017123456789 7 0 5 1763776510", legacy));
  EXPECT_EQ(legacy.rtt_hist_count, 0u);
  EXPECT_EQ(legacy.rtt_median_us(), 0.0);
  for (const char* bad : {"43:3,42:1", "42:1,42:1", "89:1", "42:4294967296", "42:", ":1", "42:1,",
                          "a:1", "-1:1", "42:1;43:1"}) {
    Accumulator a;
    const std::string v =
        std::string("3 54 1106 4 81750 18250 1700000017123456789 7 0 5 ") + bad + " 1763776510";
    EXPECT_FALSE(add_bucket_value(v, a)) << bad;
    EXPECT_EQ(a.wc_count, 0u) << bad;
    EXPECT_EQ(a.rtt_hist_count, 0u) << bad;
  }
}

// The W_c client table between the histogram and created_s (since 2026-11-24): "overflow" then
// ",id:count:sum" per client, ascending id. Read into the accumulator's table; a value without it
// reads with no table (no median); a table that is not what a writer makes makes the value
// malformed.
TEST(Schema, BucketValueWithTheWcClientTable) {
  Accumulator w;
  for (uint32_t host : {7u, 7u, 9u}) {
    Sample s;
    s.kind = SampleKind::kWc;
    const uint8_t raw[4] = {198, 51, 100, uint8_t(host)};
    s.client = IpAddr::from_v4(raw);
    s.value = host;
    w.add(s);
  }
  std::string text = format_wc_table(w);
  // Two clients, ascending ids, counts 2 and 1, sums 14 and 9 (in the order of their ids).
  ASSERT_EQ(w.wc_client_n, 2u);
  const bool seven_first = w.wc_client[0].sum == 14;
  const std::string first = seven_first ? ":2:14" : ":1:9", second = seven_first ? ":1:9" : ":2:14";
  EXPECT_EQ(text, "0," + std::to_string(w.wc_client[0].id) + first + "," +
                      std::to_string(w.wc_client[1].id) + second);
  EXPECT_EQ(format_wc_table(Accumulator{}), "0");
  Accumulator acc;
  ASSERT_TRUE(add_bucket_value(
      "3 23 179 0 0 0 1700000017123456789 3 0 5 0:0 " + text + " 1763776510", acc));
  EXPECT_EQ(acc.wc_client_n, 2u);
  EXPECT_EQ(acc.wc_client_samples, 3u);
  EXPECT_TRUE(acc.has_wc_client_median());
  EXPECT_DOUBLE_EQ(acc.wc_client_median(), 7.0);  // means 7 and 9: the lower
  // Overflow counts as covered samples, not as a client.
  Accumulator with_overflow;
  ASSERT_TRUE(add_bucket_value("4 24 180 0 0 0 1700000017123456789 4 0 5 0:0 1,5:3:21 1763776510",
                               with_overflow));
  EXPECT_EQ(with_overflow.wc_client_n, 1u);
  EXPECT_EQ(with_overflow.wc_client_overflow, 1u);
  EXPECT_TRUE(with_overflow.has_wc_client_median());
  Accumulator legacy;
  ASSERT_TRUE(add_bucket_value("3 23 179 0 0 0 1700000017123456789 3 0 5 0:0 1763776510", legacy));
  EXPECT_EQ(legacy.wc_client_samples, 0u);
  EXPECT_FALSE(legacy.has_wc_client_median());
  std::string seventeen = "0";
  for (int i = 1; i <= 17; ++i) seventeen += "," + std::to_string(i) + ":1:10";
  for (const std::string& bad : std::vector<std::string>{
           "x", "0,", "0,5:1", "0,5:1:10,", "0,9:1:10,5:1:10", "0,5:1:10,5:1:10", "0,5:0:0",
           "0,4294967296:1:10", "0,5:1:4294967296", "-1", "0;5:1:10", "4,5:1:10",
           "9007199254740993", seventeen}) {
    Accumulator b;
    const std::string v = "3 23 179 0 0 0 1700000017123456789 3 0 5 0:0 " + bad + " 1763776510";
    EXPECT_FALSE(add_bucket_value(v, b)) << bad;
    EXPECT_EQ(b.wc_count, 0u) << bad;
    EXPECT_EQ(b.wc_client_n, 0u) << bad;
  }
}

// The loss figures between the client table and created_s (since 2026-11-24):
// "flows:never4:fast:timeout". Summed into Accumulator::loss; a value without them adds nothing;
// figures that are not what a writer makes (not four decimals, never4 above flows, a count above
// 2^53) make the value malformed. A later version's fields after them are ignored.
TEST(Schema, BucketValueWithTheLossFigures) {
  LossFigures l{21, 8, 2, 3};
  EXPECT_EQ(format_loss(l), "21:8:2:3");
  EXPECT_EQ(format_loss(LossFigures{}), "0:0:0:0");
  const std::string head = "3 23 179 0 0 0 1700000017123456789 3 0 5 0:0 0,5:3:23 ";
  Accumulator acc;
  ASSERT_TRUE(add_bucket_value(head + "21:8:2:3 1763776510", acc));
  ASSERT_TRUE(add_bucket_value(head + "4:4:0:7 1763776510", acc));
  EXPECT_EQ(acc.loss.flows, 25u);   // 21 + 4
  EXPECT_EQ(acc.loss.never4, 12u);  // 8 + 4
  EXPECT_EQ(acc.loss.fast, 2u);
  EXPECT_EQ(acc.loss.timeout, 10u);  // 3 + 7
  EXPECT_EQ(acc.wc_count, 6u);       // the rest of the value is read as before
  EXPECT_TRUE(acc.has_wc_client_median());
  // Without the field (a bucket of an older writer): no figures, the rest read.
  Accumulator legacy;
  ASSERT_TRUE(add_bucket_value(head + "1763776510", legacy));
  EXPECT_EQ(legacy.loss.flows, 0u);
  EXPECT_EQ(legacy.wc_count, 3u);
  // A later field after the figures: ignored.
  Accumulator later;
  ASSERT_TRUE(add_bucket_value(head + "2:1:1:0 7:7 1763776510", later));
  EXPECT_EQ(later.loss.flows, 2u);
  for (const std::string& bad :
       std::vector<std::string>{"x", "1:0:0", "1:0:0:0:0", "1:2:0:0", "1:0:0:-1", "1::0:0",
                                "1:0:0:9007199254740993", "1;0;0;0", "1:0:0:0,"}) {
    Accumulator b;
    EXPECT_FALSE(add_bucket_value(head + bad + " 1763776510", b)) << bad;
    EXPECT_EQ(b.wc_count, 0u) << bad;
    EXPECT_EQ(b.loss.flows, 0u) << bad;
  }
}

// A value that is not what a writer makes is malformed, and the accumulator is left alone: a
// negative or non-finite field (a negative count or minimum RTT converted to an unsigned type is
// undefined behaviour; NaN would spread to every mean), a minimum RTT beyond 32 bits, a newest
// time with a sign (strtoull reads "-1" as 2^64-1, a clock in the far future).
TEST(Schema, BucketValueOutOfRangeIsMalformed) {
  const char* bad[] = {
      "-3 54 1106 4 81250 18250 1700000017123456789 7 0 5 1763776510",
      "3 nan 1106 4 81250 18250 1700000017123456789 7 0 5 1763776510",
      "3 54 inf 4 81250 18250 1700000017123456789 7 0 5 1763776510",
      "3 54 1106 4 81250 4294967296 1700000017123456789 7 0 5 1763776510",
      "3 54 1106 1e30 81250 18250 1700000017123456789 7 0 5 1763776510",
      "3 54 1106 4 81250 18250 -1 7 0 5 1763776510",
      "3 54 1106 4 81250 18250 1700000017123456789 7 -1 5 1763776510",
  };
  for (const char* v : bad) {
    Accumulator acc;
    EXPECT_FALSE(add_bucket_value(v, acc)) << v;
    EXPECT_EQ(acc.wc_count, 0u) << v;
    EXPECT_EQ(acc.newest_ts_ns, 0u) << v;
  }
  Accumulator acc;  // the bounds themselves are accepted
  EXPECT_TRUE(add_bucket_value("3 54 1106 4 81250 4294967295 18446744073709551615 7 0 5 1", acc));
  EXPECT_EQ(acc.rtt_min_us, 4294967295u);
}

// An address with a NUL inside is refused (inet_pton would read up to the NUL only).
TEST(Schema, CidrAndEndpointWithANulAreRefused) {
  Prefix p;
  EXPECT_FALSE(parse_cidr(std::string_view("198.51.100.0\0x/24", 17), p));
  RedisEndpoint ep;
  std::string error;
  EXPECT_FALSE(parse_endpoint(std::string_view("127.0.0.1\0evil:6379", 19), ep, error));
  EXPECT_NE(error.find("control character"), std::string::npos);
  EXPECT_TRUE(parse_endpoint("127.0.0.1:6379", ep, error));
}

TEST(Schema, ScriptsHaveTheirSha) {
  for (const RedisScript* s : {&write_bucket_script(), &add_activity_script(), &top_script()}) {
    EXPECT_EQ(s->sha1.size(), 40u);
    EXPECT_EQ(s->sha1, script_sha1(s->source));
  }
}

}  // namespace
}  // namespace spand
