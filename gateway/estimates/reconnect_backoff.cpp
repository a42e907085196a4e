#include "estimates/reconnect_backoff.hpp"

#include <algorithm>

namespace spand {

uint32_t reconnect_backoff_ms(uint32_t failures, double rand01) {
  uint64_t d = ReconnectBackoff::kFirstMs;
  for (uint32_t i = 1; i < failures && d < ReconnectBackoff::kMaxMs; ++i) d *= 2;
  d = std::min<uint64_t>(d, ReconnectBackoff::kMaxMs);
  return uint32_t(d / 2 + uint64_t(double(d / 2) * std::clamp(rand01, 0.0, 1.0)));
}

int64_t ReconnectBackoff::wait_ms(Clock::time_point now) const {
  if (may_try(now)) return 0;
  return std::chrono::ceil<std::chrono::milliseconds>(retry_at_ - now).count();
}

void ReconnectBackoff::failed(Clock::time_point now) {
  ++failures_;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  retry_at_ = now + std::chrono::milliseconds(reconnect_backoff_ms(failures_, u(rng_)));
}

}  // namespace spand
