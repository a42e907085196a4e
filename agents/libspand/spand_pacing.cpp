// Pacing of the initial window (DESIGN.md "Pacing": token bucket filled at cwnd / srtt) and the
// bytes-to-segments conversion callers need before spand_cwnd_opt.
#include <cmath>
#include <cstdint>

#include "spand.h"

namespace spand {
namespace {

__extension__ typedef unsigned __int128 u128;

constexpr double kUsPerS = 1e6;

// floor(units * 1e6 / srtt_us), saturating; 0 for an srtt that is not a finite positive number.
// An integral srtt (TCP_INFO's tcpi_rtt is whole microseconds) takes an exact integer path.
uint64_t rate_per_s(u128 units, double srtt_us) {
  if (!std::isfinite(srtt_us) || srtt_us <= 0.0 || units == 0) return 0;
  if (srtt_us < 18446744073709551616.0 && std::floor(srtt_us) == srtt_us) {
    const u128 q = units * 1000000u / static_cast<u128>(static_cast<uint64_t>(srtt_us));
    return q > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(q);
  }
  const long double q = static_cast<long double>(units) * kUsPerS / srtt_us;
  if (q >= 18446744073709551616.0L) return UINT64_MAX;
  return static_cast<uint64_t>(q);
}

}  // namespace
}  // namespace spand

extern "C" uint64_t spand_segments_for_bytes(uint64_t bytes, uint32_t mss_bytes) {
  if (mss_bytes == 0) return 0;
  return bytes / mss_bytes + (bytes % mss_bytes != 0);
}

extern "C" uint64_t spand_pacing_rate_bps(uint32_t cwnd_segments, uint32_t mss_bytes,
                                          double srtt_us) {
  const spand::u128 bits = static_cast<spand::u128>(cwnd_segments) * mss_bytes * 8u;
  return spand::rate_per_s(bits, srtt_us);
}

extern "C" uint64_t spand_pacing_rate_bytes_per_s(uint32_t cwnd_segments, uint32_t mss_bytes,
                                                  double srtt_us) {
  const spand::u128 bytes = static_cast<spand::u128>(cwnd_segments) * mss_bytes;
  return spand::rate_per_s(bytes, srtt_us);
}
