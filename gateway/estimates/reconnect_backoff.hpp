// When to try a Redis connection again after it failed: one policy for every Redis connection
// (the writer's and the cluster's nodes in redis_executor.cpp, the service's window readers in
// window_reader.cpp). The first retry waits 100 ms, each further failure doubles it up to 5 s,
// with "equal jitter" (half the wait fixed, half random) so that many gateways and replicas that
// lost the same Redis do not reconnect in lockstep. Between attempts a caller fails at once,
// without touching the network. A success starts over at 100 ms.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace spand {

// The wait after `failures` (>= 1) consecutive failures, `rand01` in [0, 1] picking the random
// half: between 100 ms * 2^(failures-1) / 2 and 100 ms * 2^(failures-1), capped at 5 s.
uint32_t reconnect_backoff_ms(uint32_t failures, double rand01);

class ReconnectBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kFirstMs = 100;
  static constexpr uint32_t kMaxMs = 5000;

  // `seed`: the jitter's; random unless a test fixes it.
  explicit ReconnectBackoff(uint64_t seed = std::random_device{}()) : rng_(seed) {}

  // Whether a connection attempt may be made at `now`: always before the first failure and
  // after a success.
  bool may_try(Clock::time_point now) const { return failures_ == 0 || now >= retry_at_; }
  // Milliseconds until the next attempt is allowed (0 when may_try()).
  int64_t wait_ms(Clock::time_point now) const;
  // An attempt at `now` failed: the next one waits reconnect_backoff_ms(failures()).
  void failed(Clock::time_point now);
  void succeeded() { failures_ = 0; }
  uint32_t failures() const { return failures_; }

 private:
  uint32_t failures_ = 0;
  Clock::time_point retry_at_{};
  std::minstd_rand rng_;
};

}  // namespace spand
