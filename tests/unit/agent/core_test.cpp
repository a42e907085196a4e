#include <gtest/gtest.h>

#include "fakes.hpp"

namespace spand::agent::test {
namespace {

AgentConfig config() {
  AgentConfig c;
  c.estimates_file = "x";
  PortConfig web;
  web.port = 80;
  web.response_bytes = 1448 * 11;  // F = 11 segments: with W_c = 10, b = 1 the paper's Fig. 4
  c.ports.push_back(web);
  c.policy.window_rule = WindowRule::kPaper;  // the paper's Fig. 4 numbers below
  return c;
}

struct CoreFixture : ::testing::Test {
  AgentConfig cfg = config();
  FakeClock clock;
  FakeSource source;
  FakeApplier kernel;
};

TEST_F(CoreFixture, ObservedPrefixWithEstimateIsApplied) {
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  PolicyKey key{80, P("198.51.100.0/24")};
  ASSERT_EQ(kernel.kernel.count(key), 1u);
  // DESIGN.md worked example (paper Fig. 4): W_c = 10, F = 11, b = 1 gives cwnd_opt = 5.
  EXPECT_EQ(kernel.kernel[key].init_cwnd_segments, 5u);
  EXPECT_TRUE(kernel.kernel[key].skip_slow_start);
  EXPECT_EQ(core.counters().applied_total, 1u);
  // The source is asked to watch what we care about.
  ASSERT_EQ(source.watched.size(), 1u);
  EXPECT_EQ(source.watched[0], P("198.51.100.0/24"));
}

TEST_F(CoreFixture, NoEstimateLeavesKernelAloneAndCounts) {
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("203.0.113.9"));
  core.tick();
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_EQ(core.counters().skipped_total[static_cast<size_t>(SkipReason::kNoEstimate)], 1u);
}

TEST_F(CoreFixture, SlowStartVerdictIsNotApplied) {
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10, 20, 1, Verdict::kSlowStart);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_EQ(core.counters().skipped_total[static_cast<size_t>(SkipReason::kSlowStart)], 1u);
}

TEST_F(CoreFixture, UnavailableSourceBacksOffAndKeepsDefaults) {
  source.down = true;
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  EXPECT_EQ(source.gets, 1);
  core.tick();  // same instant: inside the backoff, no second call
  EXPECT_EQ(source.gets, 1);
  clock.t += 0.6;
  core.tick();
  EXPECT_EQ(source.gets, 2);
  clock.t += 0.6;  // backoff doubled to 1 s: not yet
  core.tick();
  EXPECT_EQ(source.gets, 2);
  clock.t += 0.5;
  core.tick();
  EXPECT_EQ(source.gets, 3);
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_EQ(core.counters().source_errors_total, 3u);
  EXPECT_EQ(core.counters().skipped_total[static_cast<size_t>(SkipReason::kUnavailable)], 3u);
  // It comes back: applied at the next retry.
  source.down = false;
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  clock.t += 2.1;
  core.tick();
  EXPECT_EQ(kernel.kernel.size(), 1u);
}

TEST_F(CoreFixture, EstimateExpiresByAgeAndIsRemoved) {
  cfg.policy.max_age_s = 300;
  source.estimates[P("198.51.100.0/24")] =
      E("198.51.100.0/24", 10, 20, 50, Verdict::kUseEstimate, 290);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  EXPECT_EQ(kernel.kernel.size(), 1u);
  source.down = true;  // no refresh: the cached estimate ages
  clock.t += 11;
  core.tick();
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_EQ(core.counters().skipped_total[static_cast<size_t>(SkipReason::kStale)], 1u);
}

// The kernel's copy of a policy ends by itself when its estimate turns stale (issue 12: an
// agent killed with SIGKILL removes nothing): received + max_age_s - the estimate's age.
TEST_F(CoreFixture, PolicyCarriesTheEstimatesDeadline) {
  cfg.policy.max_age_s = 300;
  source.estimates[P("198.51.100.0/24")] =
      E("198.51.100.0/24", 10, 20, 50, Verdict::kUseEstimate, 290);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  PolicyKey key{80, P("198.51.100.0/24")};
  ASSERT_EQ(kernel.kernel.count(key), 1u);
  EXPECT_DOUBLE_EQ(kernel.kernel[key].expires_s, 1000 + 300 - 290);
}

// Refetches move the deadline on, but the kernel's copy is rewritten only once its deadline
// is within max_age_s / 2, and a renewal is neither an application nor a log line.
TEST_F(CoreFixture, DeadlineIsRenewedWhenItComesNearNotAtEveryRefetch) {
  cfg.policy.max_age_s = 300;
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  PolicyKey key{80, P("198.51.100.0/24")};
  ASSERT_EQ(kernel.upserts, 1);
  EXPECT_DOUBLE_EQ(kernel.kernel[key].expires_s, 1300);
  // Refetched every 30 s with age 0; the last tick at 1149 leaves 151 s: nothing rewritten.
  for (clock.t = 1001; clock.t <= 1149; clock.t += 1) {
    core.observe(P("198.51.100.7"));
    core.tick();
  }
  EXPECT_EQ(kernel.renews, 0);
  EXPECT_DOUBLE_EQ(kernel.kernel[key].expires_s, 1300);
  // Within 150 s of the deadline: renewed to the newest estimate's (the refetch due at 1150,
  // made by this tick).
  clock.t = 1151;
  core.tick();
  EXPECT_EQ(kernel.renews, 1);
  EXPECT_DOUBLE_EQ(kernel.kernel[key].expires_s, 1151 + 300);
  EXPECT_EQ(kernel.upserts, 1);
  EXPECT_EQ(core.counters().applied_total, 1u);
  EXPECT_EQ(core.counters().renewed_total, 1u);
  // Then quiet again until the new deadline comes near.
  clock.t = 1152;
  core.tick();
  EXPECT_EQ(kernel.renews, 1);
}

TEST_F(CoreFixture, PushedUpdateReplacesPolicyAndSecondConnectionIsACacheHit) {
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  core.observe(P("198.51.100.8"));
  EXPECT_EQ(core.counters().cache_hits_total, 1u);
  source.pushes.push_back(E("198.51.100.0/24", 30));
  core.tick();
  PolicyKey key{80, P("198.51.100.0/24")};
  // W_c = 30, F = 11: one window carries it all (loss-free end, shifted): cwnd_opt = 11.
  EXPECT_EQ(kernel.kernel[key].init_cwnd_segments, 11u);
  EXPECT_EQ(core.counters().applied_total, 2u);
  core.tick();  // unchanged: no rewrite
  EXPECT_EQ(kernel.upserts, 2);
}

TEST_F(CoreFixture, PushForUnknownPrefixIsIgnored) {
  AgentCore core(cfg, source, kernel, clock);
  source.pushes.push_back(E("192.0.2.0/24", 30));
  core.tick();
  EXPECT_TRUE(kernel.kernel.empty());
}

TEST_F(CoreFixture, StaticPrefixesAreFetchedWithoutConnections) {
  cfg.static_prefixes.push_back(P("198.51.100.0/24"));
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.tick();
  EXPECT_EQ(kernel.kernel.size(), 1u);
}

TEST_F(CoreFixture, RouteAppliersGetOnePolicyPerPrefix) {
  kernel.ports = false;
  PortConfig other;
  other.port = 443;
  other.response_bytes = 1000000;
  cfg.ports.push_back(other);
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  ASSERT_EQ(kernel.kernel.size(), 1u);
  EXPECT_EQ(kernel.kernel.begin()->first.port, 0);
  EXPECT_EQ(kernel.kernel.begin()->second.init_cwnd_segments, 5u);  // the first port's size
}

TEST_F(CoreFixture, ShutdownRemovesEverythingAndStops) {
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  core.shutdown();
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_TRUE(kernel.stopped);
  EXPECT_EQ(core.installed(), 0u);
}

TEST_F(CoreFixture, IdlePrefixIsForgottenAndItsPolicyRemoved) {
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10, 20, 50);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  clock.t += 601;  // refreshes keep it fresh, but no connection for 10 minutes
  core.tick();
  EXPECT_TRUE(kernel.kernel.empty());
  EXPECT_TRUE(core.wanted().empty());
}

TEST_F(CoreFixture, ApplyFailureIsCountedAndRetried) {
  kernel.fail = true;
  source.estimates[P("198.51.100.0/24")] = E("198.51.100.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("198.51.100.7"));
  core.tick();
  EXPECT_EQ(core.counters().apply_errors_total, 1u);
  kernel.fail = false;
  core.tick();  // not before the retry delay: a failing kernel is not hammered every tick
  EXPECT_TRUE(kernel.kernel.empty());
  clock.t += 31;
  core.tick();
  EXPECT_EQ(kernel.kernel.size(), 1u);
}

}  // namespace
}  // namespace spand::agent::test
