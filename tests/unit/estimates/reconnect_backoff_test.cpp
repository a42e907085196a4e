// The one reconnect policy of every Redis connection (gateway/estimates/reconnect_backoff.hpp),
// driven with made-up times: no sleep, no wall clock.
#include "estimates/reconnect_backoff.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

namespace spand {
namespace {

using std::chrono::milliseconds;

TEST(ReconnectBackoff, WaitDoublesFrom100msTo5sWithEqualJitter) {
  // Equal jitter: between half and all of 100 ms * 2^(failures-1), capped at 5 s.
  const uint32_t full[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
  for (uint32_t f = 1; f <= 9; ++f) {
    EXPECT_EQ(reconnect_backoff_ms(f, 0.0), full[f - 1] / 2) << f;
    EXPECT_EQ(reconnect_backoff_ms(f, 1.0), full[f - 1]) << f;
    uint32_t mid = reconnect_backoff_ms(f, 0.5);
    EXPECT_GT(mid, full[f - 1] / 2);
    EXPECT_LT(mid, full[f - 1]);
  }
  EXPECT_EQ(reconnect_backoff_ms(100, 1.0), 5000u);
  EXPECT_EQ(reconnect_backoff_ms(UINT32_MAX, 1.0), 5000u);
}

TEST(ReconnectBackoff, AttemptsOnlyAfterTheWaitAndStartsOverAfterASuccess) {
  ReconnectBackoff b(1);
  const auto t0 = ReconnectBackoff::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(b.may_try(t0));  // nothing failed yet
  EXPECT_EQ(b.wait_ms(t0), 0);
  // Each failure at the moment the previous wait ended: the wait lies in [full / 2, full].
  const uint32_t full[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  auto now = t0;
  for (uint32_t f = 1; f <= 8; ++f) {
    b.failed(now);
    EXPECT_EQ(b.failures(), f);
    const int64_t wait = b.wait_ms(now);
    EXPECT_GE(wait, full[f - 1] / 2) << f;
    EXPECT_LE(wait, full[f - 1]) << f;
    EXPECT_FALSE(b.may_try(now + milliseconds(full[f - 1] / 2) - milliseconds(1))) << f;
    EXPECT_TRUE(b.may_try(now + milliseconds(full[f - 1]))) << f;
    now += milliseconds(wait);
    EXPECT_TRUE(b.may_try(now)) << f;
  }
  b.succeeded();
  EXPECT_EQ(b.failures(), 0u);
  EXPECT_TRUE(b.may_try(now));
  b.failed(now);  // back to the first wait
  EXPECT_LE(b.wait_ms(now), 100);
  EXPECT_GE(b.wait_ms(now), 50);
}

TEST(ReconnectBackoff, JitterKeepsPeersApart) {
  // Twenty peers that lost Redis at the same moment: their third retries are spread over the
  // random half of the wait (200-400 ms), not all at one time.
  const auto t0 = ReconnectBackoff::Clock::time_point{};
  std::set<int64_t> waits;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ReconnectBackoff b(seed);
    b.failed(t0);
    b.failed(t0);
    b.failed(t0);
    waits.insert(b.wait_ms(t0));
  }
  EXPECT_GE(waits.size(), 10u);
  EXPECT_GE(*waits.begin(), 200);
  EXPECT_LE(*waits.rbegin(), 400);
}

}  // namespace
}  // namespace spand
