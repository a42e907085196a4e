#include "estimates/estimate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace spand {
namespace {

constexpr uint64_t kSec = 1'000'000'000ULL;

Sample wc(uint32_t v, uint64_t ts_ns) {
  Sample s;
  s.kind = SampleKind::kWc;
  s.value = v;
  s.ts_ns = ts_ns;
  return s;
}

Sample rtt(uint32_t us, uint64_t ts_ns) {
  Sample s;
  s.kind = SampleKind::kRtt;
  s.value = us;
  s.ts_ns = ts_ns;
  return s;
}

TEST(Estimate, MeanStddevRttAgeAgainstDirectComputation) {
  const std::vector<uint32_t> wcs = {10, 12, 7, 30, 11, 9, 14};
  const std::vector<uint32_t> rtts_us = {20'000, 25'500, 18'250};
  Accumulator acc;
  for (size_t i = 0; i < wcs.size(); ++i) acc.add(wc(wcs[i], 100 * kSec + i * kSec));
  for (size_t i = 0; i < rtts_us.size(); ++i) acc.add(rtt(rtts_us[i], 101 * kSec + i * kSec));
  // Two-pass mean and sample variance over the raw values, independent of the sums.
  double mean = 0;
  for (uint32_t v : wcs) mean += v;
  mean /= double(wcs.size());
  double ss = 0;
  for (uint32_t v : wcs) ss += (v - mean) * (v - mean);
  double stddev = std::sqrt(ss / double(wcs.size() - 1));

  Estimate e = compute_estimate(acc, 110 * kSec, 5);
  EXPECT_EQ(e.samples, 7u);
  EXPECT_EQ(e.rtt_samples, 3u);
  EXPECT_NEAR(e.wc_segments, mean, 1e-12);
  EXPECT_NEAR(e.wc_stddev, stddev, 1e-9);
  EXPECT_NEAR(e.rtt_mean_ms, (20.0 + 25.5 + 18.25) / 3, 1e-12);
  // The median (20 ms) from four bins per octave: within 25 % of it.
  EXPECT_TRUE(e.rtt_is_median);
  EXPECT_GE(e.rtt_ms, 20.0 / 1.25);
  EXPECT_LE(e.rtt_ms, 20.0 * 1.25);
  EXPECT_DOUBLE_EQ(e.min_rtt_ms, 18.25);
  EXPECT_DOUBLE_EQ(e.age_s, 4.0);  // newest sample: W_c at 106 s; now 110 s
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  EXPECT_DOUBLE_EQ(e.decay_factor, 1.0);
}

// The RTT bins as their definition says (prefix.hpp): 16 us and up, four per octave at 1, 1.25,
// 1.5 and 1.75 times a power of two; every value lies in [low(bin), low(bin + 1)) and a bin's
// upper edge is at most 1.25 times its lower one.
TEST(RttHistogram, BinsFollowTheirDefinition) {
  EXPECT_EQ(rtt_bin(0), 0u);
  EXPECT_EQ(rtt_bin(15), 0u);
  EXPECT_EQ(rtt_bin(16), 1u);
  EXPECT_EQ(rtt_bin(19), 1u);
  EXPECT_EQ(rtt_bin(20), 2u);
  EXPECT_EQ(rtt_bin(24), 3u);
  EXPECT_EQ(rtt_bin(28), 4u);
  EXPECT_EQ(rtt_bin(32), 5u);
  EXPECT_EQ(rtt_bin(60'000'000), kRttBins - 1);  // the 60 s sample bound
  EXPECT_EQ(rtt_bin(UINT32_MAX), kRttBins - 1);
  for (uint32_t b = 1; b + 1 < kRttBins; ++b) {
    EXPECT_EQ(rtt_bin(rtt_bin_low_us(b)), b);
    EXPECT_EQ(rtt_bin(rtt_bin_low_us(b + 1) - 1), b);
    EXPECT_LE(double(rtt_bin_low_us(b + 1)), 1.25 * rtt_bin_low_us(b));
  }
}

// One forged or outlying RTT (issue 12: a 3 s RTT made a 60 KB response take 3.6 s) moves the
// mean six-fold and the median not at all: ten 50 ms samples and one of 3 s.
TEST(RttHistogram, OneForgedSampleMovesTheMeanNotTheMedian) {
  Accumulator acc;
  for (int i = 0; i < 10; ++i) acc.add(rtt(50'000, (100 + i) * kSec));
  acc.add(rtt(3'000'000, 111 * kSec));
  const Estimate e = compute_estimate(acc, 112 * kSec, 1);
  EXPECT_NEAR(e.rtt_mean_ms, (10 * 50.0 + 3000.0) / 11, 1e-9);  // 318.2
  EXPECT_TRUE(e.rtt_is_median);
  EXPECT_GE(e.rtt_ms, 50.0);         // never below the minimum
  EXPECT_LE(e.rtt_ms, 50.0 * 1.25);  // the bin of 50 ms
  // Five forged samples out of fifteen still leave it there; a majority moves it.
  for (int i = 0; i < 4; ++i) acc.add(rtt(3'000'000, 111 * kSec));
  EXPECT_LE(compute_estimate(acc, 112 * kSec, 1).rtt_ms, 50.0 * 1.25);
  for (int i = 0; i < 6; ++i) acc.add(rtt(3'000'000, 111 * kSec));
  EXPECT_GE(compute_estimate(acc, 112 * kSec, 1).rtt_ms, 3000.0 / 1.25);
}

// Against the exact median of random samples spread over five decades: within 25 % (for an even
// count, of the range between the two middle samples).
TEST(RttHistogram, MedianWithinABinOfTheExactMedian) {
  uint64_t x = 7;
  for (int round = 0; round < 200; ++round) {
    Accumulator acc;
    std::vector<double> v;
    const int n = 1 + round % 37;
    for (int i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t us =
          uint32_t(std::pow(10.0, 1.5 + 5.0 * double(x >> 11) / double(1ull << 53)));
      v.push_back(us);
      acc.add(rtt(us, kSec));
    }
    std::sort(v.begin(), v.end());
    // The middle sample; for an even count, anywhere between the two middle ones.
    const double lo = v[(n - 1) / 2], hi = v[n / 2];
    const double m = acc.rtt_median_us();
    EXPECT_LE(m, hi * 1.25) << round;
    EXPECT_GE(m, lo / 1.25) << round;
  }
}

// A window with a bucket written before the histogram existed has no median: the mean is used.
TEST(RttHistogram, NoMedianWhenSomeSamplesHaveNoBin) {
  Accumulator acc;
  acc.add(rtt(20'000, kSec));
  acc.rtt_count += 1;  // a legacy bucket's sample: counted and summed, not binned
  acc.rtt_sum_us += 40'000;
  EXPECT_EQ(acc.rtt_median_us(), 0.0);
  const Estimate e = compute_estimate(acc, 2 * kSec, 1);
  EXPECT_FALSE(e.rtt_is_median);
  EXPECT_DOUBLE_EQ(e.rtt_ms, 30.0);
}

// Distinct clients (issue 12: six connections from one place set a /24's window): W_c samples
// from one client address give SLOW_START below min_clients, whatever their number; a second
// client makes the estimate usable; a window without a client mask (written before it existed)
// is not held to the rule.
TEST(Estimate, MinimumDistinctClients) {
  Accumulator acc;
  Sample s = wc(5255, kSec);
  s.client.bytes[15] = 7;
  for (int i = 0; i < 50; ++i) acc.add(s);
  Estimate e = compute_estimate(acc, 2 * kSec, 5, {}, 2);
  EXPECT_EQ(e.clients, 1u);
  EXPECT_EQ(e.verdict, Verdict::kSlowStart);
  EXPECT_EQ(compute_estimate(acc, 2 * kSec, 5, {}, 1).verdict, Verdict::kUseEstimate);
  // Another address: a different bit unless the two share one (1 in 32); find one that does not.
  Sample other = s;
  for (uint8_t b = 8; client_bit(other.client) == client_bit(s.client); ++b)
    other.client.bytes[15] = b;
  acc.add(other);
  e = compute_estimate(acc, 2 * kSec, 5, {}, 2);
  EXPECT_EQ(e.clients, 2u);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  EXPECT_EQ(compute_estimate(acc, 2 * kSec, 5, {}, 3).verdict, Verdict::kSlowStart);
  Accumulator legacy = acc;
  legacy.wc_clients = 0;
  EXPECT_EQ(compute_estimate(legacy, 2 * kSec, 5, {}, 3).verdict, Verdict::kUseEstimate);
  // The mask survives merging (buckets of a window).
  Accumulator a, b;
  a.add(s);
  b.add(other);
  a.merge(b);
  EXPECT_EQ(a.distinct_wc_clients(), 2u);
}

// Outlier rule: ten W_c samples near 10 and one forged 5255 (issue 12's sequence jump) have a
// standard deviation 3.25 times their mean: SLOW_START with max_wc_cv 2; the honest ten alone
// (and every prefix of the bundled captures, at most 1.24) stay USE_ESTIMATE.
TEST(Estimate, OutlierRuleRefusesAWindowDominatedByFewExtremeSamples) {
  Accumulator acc;
  for (uint32_t v : {8, 9, 10, 10, 11, 12, 9, 10, 11, 10}) acc.add(wc(v, kSec));
  Estimate e = compute_estimate(acc, 2 * kSec, 5, {}, 1, 2.0);
  EXPECT_FALSE(e.outlier);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  acc.add(wc(5255, kSec));
  e = compute_estimate(acc, 2 * kSec, 5, {}, 1, 2.0);
  EXPECT_NEAR(e.wc_stddev / e.wc_segments, 3.25, 0.05);
  EXPECT_TRUE(e.outlier);
  EXPECT_EQ(e.verdict, Verdict::kSlowStart);
  EXPECT_EQ(compute_estimate(acc, 2 * kSec, 5, {}, 1, 0).verdict, Verdict::kUseEstimate);
}

TEST(Estimate, VerdictThreshold) {
  Accumulator acc;
  for (int i = 0; i < 4; ++i) acc.add(wc(10, kSec));
  EXPECT_EQ(compute_estimate(acc, 2 * kSec).verdict, Verdict::kSlowStart);  // default 5
  acc.add(wc(10, kSec));
  EXPECT_EQ(compute_estimate(acc, 2 * kSec).verdict, Verdict::kUseEstimate);
  EXPECT_EQ(compute_estimate(acc, 2 * kSec, 6).verdict, Verdict::kSlowStart);
  // RTT samples alone never give an estimate.
  Accumulator only_rtt;
  for (int i = 0; i < 50; ++i) only_rtt.add(rtt(1000, kSec));
  EXPECT_EQ(compute_estimate(only_rtt, 2 * kSec, 0).verdict, Verdict::kSlowStart);
  Estimate empty = compute_estimate(Accumulator{}, 2 * kSec);
  EXPECT_EQ(empty.samples, 0u);
  EXPECT_EQ(empty.min_rtt_ms, 0.0);
  EXPECT_EQ(empty.age_s, 0.0);
  EXPECT_STREQ(verdict_name(empty.verdict), "SLOW_START");
}

TEST(Estimate, DecayIsOffByDefaultAndHalvesPerHalfLife) {
  Accumulator acc;
  for (int i = 0; i < 10; ++i) acc.add(wc(50, 100 * kSec));
  // 100 s old: no decay by default.
  EXPECT_DOUBLE_EQ(compute_estimate(acc, 200 * kSec).wc_segments, 50.0);
  DecayOptions d;
  d.half_life_s = 30;
  d.grace_s = 40;
  d.floor_segments = 10;
  // age 100, grace 40: 60 s of decay = two half-lives; 10 + 40 / 4 = 20.
  Estimate e = compute_estimate(acc, 200 * kSec, 5, d);
  EXPECT_NEAR(e.wc_segments, 20.0, 1e-12);
  EXPECT_NEAR(e.decay_factor, 0.25, 1e-12);
  EXPECT_EQ(e.samples, 10u);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  // Inside the grace period: unchanged. A mean below the floor is never raised.
  EXPECT_DOUBLE_EQ(compute_estimate(acc, 130 * kSec, 5, d).wc_segments, 50.0);
  Accumulator small;
  for (int i = 0; i < 10; ++i) small.add(wc(4, 100 * kSec));
  EXPECT_DOUBLE_EQ(compute_estimate(small, 300 * kSec, 5, d).wc_segments, 4.0);
}

}  // namespace
}  // namespace spand
