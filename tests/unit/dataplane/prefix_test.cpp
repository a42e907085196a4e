// Client networks: host bits cleared, text form, and the accumulator's statistics (text into a
// prefix: tests/unit/net/ip_prefix_test.cpp).
#include "dataplane/prefix.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "sim.hpp"

namespace spand::test {
namespace {

std::string net(const std::string& addr_text, uint8_t len) {
  return prefix_with_len(addr(addr_text), len).to_string();
}

TEST(Prefix, HostBitsCleared) {
  EXPECT_EQ(net("198.51.100.77", 24), "198.51.100.0/24");
  EXPECT_EQ(net("198.51.100.77", 22), "198.51.100.0/22");  // 100 = 0b01100100
  EXPECT_EQ(net("198.51.103.77", 22), "198.51.100.0/22");  // 103 = 0b01100111
  EXPECT_EQ(net("198.51.100.77", 32), "198.51.100.77/32");
  EXPECT_EQ(net("198.51.100.77", 0), "0.0.0.0/0");
  EXPECT_EQ(net("198.51.100.77", 40), "198.51.100.77/32");  // clamped to the family
  EXPECT_EQ(net("2001:db8:abcd:1234::1", 48), "2001:db8:abcd::/48");
  EXPECT_EQ(net("2001:db8:abcd:1234::1", 52), "2001:db8:abcd:1000::/52");
  EXPECT_EQ(net("2001:db8::1", 128), "2001:db8::1/128");
}

TEST(Prefix, DefaultLengthsAndEquality) {
  PrefixConfig cfg;
  EXPECT_EQ(prefix_of(addr("203.0.113.9"), cfg).to_string(), "203.0.113.0/24");
  EXPECT_EQ(prefix_of(addr("2001:db8:1:2::3"), cfg).to_string(), "2001:db8:1::/48");
  EXPECT_EQ(prefix_of(addr("203.0.113.9"), cfg), prefix_of(addr("203.0.113.200"), cfg));
  EXPECT_NE(prefix_of(addr("203.0.113.9"), cfg), prefix_of(addr("203.0.114.9"), cfg));
  PrefixHash h;
  EXPECT_EQ(h(prefix_of(addr("203.0.113.9"), cfg)), h(prefix_of(addr("203.0.113.200"), cfg)));
}

TEST(Accumulator, MeanStddevMinAndMerge) {
  Accumulator a, b;
  const uint32_t wc[] = {4, 8, 6, 10};
  for (int i = 0; i < 4; ++i) {
    Sample s;
    s.kind = SampleKind::kWc;
    s.value = wc[i];
    s.ts_ns = 100 + i;
    (i < 2 ? a : b).add(s);
  }
  Sample r;
  r.kind = SampleKind::kRtt;
  r.value = 30'000;
  a.add(r);
  r.value = 20'000;
  b.add(r);
  a.merge(b);
  EXPECT_EQ(a.wc_count, 4u);
  EXPECT_DOUBLE_EQ(a.wc_mean(), 7.0);
  // Sample standard deviation of {4, 8, 6, 10}: sqrt(20 / 3).
  EXPECT_NEAR(a.wc_stddev(), std::sqrt(20.0 / 3.0), 1e-12);
  EXPECT_EQ(a.rtt_min_us, 20'000u);
  EXPECT_DOUBLE_EQ(a.rtt_mean_us(), 25'000.0);
  EXPECT_EQ(a.newest_ts_ns, 103u);
}

}  // namespace
}  // namespace spand::test
