#include "policy.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "fakes.hpp"

namespace spand::agent::test {
namespace {

PortConfig port(uint64_t bytes, uint32_t b = 1) {
  PortConfig p;
  p.port = 80;
  p.response_bytes = bytes;
  p.acked_per_ack = b;
  return p;
}

TEST(Policy, WorkedExampleAndPacingAndRto) {
  PolicyConfig pol;
  Decision d = decide(E("198.51.100.0/24", 10, 20), 0, port(1448 * 11), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 5u);
  // 5 segments * 1448 bytes per 20 ms.
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 5u * 1448u * 50u);
  EXPECT_EQ(d.policy.srtt_us, 20000u);
  EXPECT_EQ(d.policy.syn_rto_ms, 200u);  // 3 * 20 ms = 60 ms, floored at 200 ms
}

TEST(Policy, AbsurdWindowIsCapped) {
  PolicyConfig pol;
  pol.max_initial_cwnd = 64;
  Decision d = decide(E("198.51.100.0/24", 1e6), 0, port(10'000'000), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);
  EXPECT_TRUE(d.policy.capped);
  EXPECT_EQ(d.policy.wc_segments, 64u);  // what spand_tune computes from: capped too
  Decision huge = decide(E("198.51.100.0/24", 1e30), 0, port(10'000'000), pol, {});
  ASSERT_EQ(huge.skip, SkipReason::kNone);
  EXPECT_EQ(huge.policy.init_cwnd_segments, 64u);
}

TEST(Policy, SkipReasons) {
  PolicyConfig pol;
  pol.min_samples = 5;
  pol.max_age_s = 300;
  EXPECT_EQ(decide(E("198.51.100.0/24", 10, 20, 4), 0, port(1000), pol, {}).skip,
            SkipReason::kTooFewSamples);
  EXPECT_EQ(decide(E("198.51.100.0/24", 10), 301, port(1000), pol, {}).skip, SkipReason::kStale);
  EXPECT_EQ(decide(E("198.51.100.0/24", NAN), 0, port(1000), pol, {}).skip, SkipReason::kInvalid);
  EXPECT_EQ(decide(E("198.51.100.0/24", 0.2), 0, port(1000), pol, {}).skip, SkipReason::kInvalid);
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 10, 20, 50, Verdict::kUnspecified), 0, port(1000), pol, {}).skip,
      SkipReason::kSlowStart);
  PortConfig off = port(1000);
  off.enabled = false;
  EXPECT_EQ(decide(E("198.51.100.0/24", 10), 0, off, pol, {}).skip, SkipReason::kPortDisabled);
}

TEST(Policy, NoRttMeansNoPacingAndNoRtoSeed) {
  PolicyConfig pol;
  Decision d = decide(E("198.51.100.0/24", 10, 0), 0, port(1448 * 11), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 0u);
  EXPECT_EQ(d.policy.syn_rto_ms, 0u);
}

TEST(Policy, HighBdpCongestionControlOnlyWhenAvailable) {
  PolicyConfig pol;
  pol.high_bdp_cc = "cubic";
  pol.high_bdp_wc_segments = 16;
  EXPECT_EQ(decide(E("198.51.100.0/24", 40), 0, port(100000), pol, {"reno", "cubic"})
                .policy.congestion_control,
            "cubic");
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 40), 0, port(100000), pol, {"reno"}).policy.congestion_control,
      "");
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 15), 0, port(100000), pol, {"cubic"}).policy.congestion_control,
      "");
}

TEST(Policy, SynRtoBounds) {
  EXPECT_EQ(syn_rto_ms_for(100'000), 300u);
  EXPECT_EQ(syn_rto_ms_for(1'000), 200u);
  EXPECT_EQ(syn_rto_ms_for(2'000'000), 1000u);
}

}  // namespace
}  // namespace spand::agent::test
