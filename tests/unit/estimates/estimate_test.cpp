#include "estimates/estimate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
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

// A W_c sample from client 198.51.100.<host> (a distinct address per host up to 255; above, the
// third byte changes too: still one address per host).
Sample wc_from(uint32_t host, uint32_t v, uint64_t ts_ns) {
  Sample s = wc(v, ts_ns);
  const uint8_t raw[4] = {198, 51, uint8_t(100 + host / 256), uint8_t(host % 256)};
  s.client = IpAddr::from_v4(raw);
  return s;
}

// The accumulator as a reader sees one made before the client table: the same sums, no table.
Accumulator legacy(Accumulator acc) {
  acc.wc_client = {};
  acc.wc_client_n = 0;
  acc.wc_client_overflow = 0;
  acc.wc_client_samples = 0;
  return acc;
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
// The rule applies to windows whose W_c is the mean: some bucket written without a client table
// (legacy() below); a window with tables takes the median of per-client means instead.
TEST(Estimate, OutlierRuleRefusesAWindowDominatedByFewExtremeSamples) {
  Accumulator acc;
  for (uint32_t v : {8, 9, 10, 10, 11, 12, 9, 10, 11, 10}) acc.add(wc(v, kSec));
  Estimate e = compute_estimate(legacy(acc), 2 * kSec, 5, {}, 1, 2.0);
  EXPECT_FALSE(e.wc_is_median);
  EXPECT_FALSE(e.outlier);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  acc.add(wc(5255, kSec));
  e = compute_estimate(legacy(acc), 2 * kSec, 5, {}, 1, 2.0);
  EXPECT_NEAR(e.wc_stddev / e.wc_segments, 3.25, 0.05);
  EXPECT_TRUE(e.outlier);
  EXPECT_EQ(e.verdict, Verdict::kSlowStart);
  EXPECT_EQ(compute_estimate(legacy(acc), 2 * kSec, 5, {}, 1, 0).verdict, Verdict::kUseEstimate);
  // With the table the rule is off: the same window is the median of its one client's mean.
  e = compute_estimate(acc, 2 * kSec, 5, {}, 1, 2.0);
  EXPECT_TRUE(e.wc_is_median);
  EXPECT_FALSE(e.outlier);
  EXPECT_DOUBLE_EQ(e.wc_segments, (100.0 + 5255) / 11);
}

// The robust W_c (issue 12): each client's mean, then the lower median of those, against a
// direct computation over the raw samples (per-address lists, sorted means).
double lower_median_of_client_means(const std::map<uint32_t, std::vector<uint32_t>>& by_host) {
  std::vector<double> means;
  for (const auto& [host, values] : by_host) {
    double sum = 0;
    for (uint32_t v : values) sum += v;
    means.push_back(sum / double(values.size()));
  }
  std::sort(means.begin(), means.end());
  return means[(means.size() - 1) / 2];
}

TEST(Estimate, WcIsTheLowerMedianOfPerClientMeans) {
  std::map<uint32_t, std::vector<uint32_t>> honest = {
      {1, {8, 9, 10}}, {2, {12, 12}}, {3, {10}}, {4, {9, 11, 13, 7}}, {5, {20, 16}}};
  // Client means 9, 12, 10, 10, 18: sorted 9 10 10 12 18, the middle one 10.
  ASSERT_DOUBLE_EQ(lower_median_of_client_means(honest), 10.0);
  Accumulator acc;
  for (const auto& [host, values] : honest)
    for (uint32_t v : values) acc.add(wc_from(host, v, kSec));
  Estimate e = compute_estimate(acc, 2 * kSec, 5, {}, 2);
  EXPECT_TRUE(e.wc_is_median);
  EXPECT_DOUBLE_EQ(e.wc_segments, 10.0);
  EXPECT_DOUBLE_EQ(e.wc_mean_segments, 137.0 / 12);
  EXPECT_EQ(e.clients, 5u);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  // One client with six forged sequence-jump samples (5255, issue 12): the mean goes to 1,759,
  // the median stays (six client means, the third smallest is still 10).
  Accumulator forged_up = acc;
  for (int i = 0; i < 6; ++i) forged_up.add(wc_from(66, 5255, kSec));
  e = compute_estimate(forged_up, 2 * kSec, 5, {}, 2);
  EXPECT_NEAR(e.wc_mean_segments, (137.0 + 6 * 5255) / 18, 1e-9);
  EXPECT_DOUBLE_EQ(e.wc_segments, 10.0);
  EXPECT_EQ(e.verdict, Verdict::kUseEstimate);
  // One client pulling down (six samples of 2): 9 10 10 12 18 plus 2, the third is 10.
  Accumulator forged_down = acc;
  for (int i = 0; i < 6; ++i) forged_down.add(wc_from(67, 2, kSec));
  EXPECT_DOUBLE_EQ(compute_estimate(forged_down, 2 * kSec, 5, {}, 2).wc_segments, 10.0);
  // Lifting it above every honest client takes more forged clients than honest ones: with five
  // forged ones it is 18 (the fifth smallest of ten: the largest honest mean), with six 5255.
  Accumulator many = acc;
  for (uint32_t h = 100; h < 105; ++h) many.add(wc_from(h, 5255, kSec));
  EXPECT_DOUBLE_EQ(compute_estimate(many, 2 * kSec, 5, {}, 2).wc_segments, 18.0);
  many.add(wc_from(105, 5255, kSec));
  EXPECT_DOUBLE_EQ(compute_estimate(many, 2 * kSec, 5, {}, 2).wc_segments, 5255.0);
  // Two clients: the smaller mean, so one forger beside one honest client cannot lift it.
  Accumulator two;
  for (uint32_t v : {10, 10, 11}) two.add(wc_from(1, v, kSec));
  for (int i = 0; i < 20; ++i) two.add(wc_from(2, 5255, kSec));
  EXPECT_NEAR(compute_estimate(two, 2 * kSec, 5, {}, 2).wc_segments, 31.0 / 3, 1e-12);
}

// Random clients and values against the direct computation, with more clients than the table
// holds (the median is then over the 16 smallest client ids, computed here from client_id).
TEST(Estimate, MedianMatchesDirectComputationOnRandomWindows) {
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(state >> 33);
  };
  for (int round = 0; round < 200; ++round) {
    const uint32_t clients = 1 + next() % 40;
    std::map<uint32_t, std::vector<uint32_t>> by_id;  // client_id -> values
    std::vector<Sample> samples;
    for (uint32_t c = 0; c < clients; ++c) {
      const uint32_t n = 1 + next() % 5;
      for (uint32_t i = 0; i < n; ++i) {
        Sample s = wc_from(1000 + c, 1 + next() % 300, kSec);
        by_id[client_id(s.client)].push_back(s.value);
        samples.push_back(s);
      }
    }
    std::map<uint32_t, std::vector<uint32_t>> kept;
    uint64_t left_out = 0;
    for (const auto& [id, values] : by_id) {
      if (kept.size() < kWcClientSlots)
        kept[id] = values;
      else
        left_out += values.size();
    }
    // Split over four accumulators (buckets, gateways) merged in some order.
    Accumulator parts[4];
    for (size_t i = 0; i < samples.size(); ++i) parts[next() % 4].add(samples[i]);
    Accumulator acc;
    for (uint32_t i : {2u, 0u, 3u, 1u}) acc.merge(parts[i]);
    ASSERT_TRUE(acc.has_wc_client_median());
    EXPECT_EQ(acc.wc_client_n, kept.size());
    EXPECT_EQ(acc.wc_client_overflow, left_out);
    EXPECT_DOUBLE_EQ(acc.wc_client_median(), lower_median_of_client_means(kept)) << round;
  }
}

// A window with a bucket written without a client table (before 2026-11-24) has W_c samples no
// table covers: the mean, as before.
TEST(Estimate, WindowWithALegacyBucketFallsBackToTheMean) {
  Accumulator acc;
  for (uint32_t v : {10, 12, 14, 16, 18}) acc.add(wc_from(v, v, kSec));
  Accumulator old_bucket;
  for (uint32_t v : {100, 100}) old_bucket.add(wc_from(7, v, kSec));
  acc.merge(legacy(old_bucket));
  EXPECT_FALSE(acc.has_wc_client_median());
  const Estimate e = compute_estimate(acc, 2 * kSec, 5, {}, 2);
  EXPECT_FALSE(e.wc_is_median);
  EXPECT_DOUBLE_EQ(e.wc_segments, 270.0 / 7);
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
