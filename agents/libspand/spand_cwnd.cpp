// cwnd_opt, DESIGN.md Eq. 1-4, in closed form. Notation: W = W_c, S(m) = sum_{i=m}^{W} i,
// T(k) = 1 + ... + k, so S(m) = T(W) - T(m - 1) for 1 <= m <= W + 1, r = F mod F_E.
// Edge cases and their reasons are in spand.h and README, "libspand: cwnd_opt and pacing (C API)
// and `spandctl cwnd`".
#include <cmath>
#include <cstdint>

#include "spand.h"

namespace spand {
namespace {

// T(k) for k < 2^32 is below 2^63, so every sum of window sizes fits in 64 bits; only products
// with b need an overflow check (F_E) or are avoided (the Eq. 4 division below).
constexpr uint64_t triangle(uint64_t k) {
  return k % 2 == 0 ? (k / 2) * (k + 1) : k * ((k + 1) / 2);
}

// 64-bit division costs several times a 32-bit one on many x86 cores, and the operands are
// almost always small (windows of hundreds of segments, transfers of thousands).
inline uint64_t div_u64(uint64_t x, uint64_t y) {
  if ((x | y) >> 32 == 0) return static_cast<uint32_t>(x) / static_cast<uint32_t>(y);
  return x / y;
}

inline uint64_t div_ceil(uint64_t x, uint64_t y) {
  const uint64_t q = div_u64(x, y);
  return q + (q * y != x);
}

// The largest k in [0, limit] with T(k) <= bound. In the reals k = floor(sqrt(2 bound + 1/4) -
// 1/2); a double is within one of that for bound < 2^63, and the two steps fix the rounding.
uint64_t largest_k_triangle_at_most(uint64_t bound, uint64_t limit) {
  const double root = std::sqrt(2.0 * static_cast<double>(bound) + 0.25) - 0.5;
  uint64_t k = root <= 0.0 ? 0 : static_cast<uint64_t>(root);
  if (k > limit) k = limit;
  while (k > 0 && triangle(k) > bound) --k;
  while (k < limit && triangle(k + 1) <= bound) ++k;
  return k;
}

// Eq. 3: the largest m <= W with b * S(m) >= r; 0 when no m >= 1 qualifies (S(m) for m <= 0
// is no larger than S(1), so none does). b * S >= r iff S >= ceil(r / b) because S is an
// integer, which keeps the search free of 128-bit products.
uint64_t eq3_m(uint64_t w, uint64_t r, uint64_t b) {
  const uint64_t need = div_ceil(r, b);
  const uint64_t t_w = triangle(w);
  if (need > t_w) return 0;
  // S(m) >= need  <=>  T(m - 1) <= T(W) - need; m <= W  <=>  m - 1 <= W - 1.
  return largest_k_triangle_at_most(t_w - need, w - 1) + 1;
}

// Eq. 2: the largest m <= W + 1 with b * S(m) + (2W + 1) >= r. Always >= floor((W + 1) / 2)
// because r < F_E, i.e. r <= b * S(floor((W + 1) / 2)) + 2W.
uint64_t eq2_m(uint64_t w, uint64_t r, uint64_t b) {
  const uint64_t loss_segments = 2 * w + 1;
  if (r <= loss_segments) return w + 1;  // S(W + 1) = 0 already qualifies
  const uint64_t need = div_ceil(r - loss_segments, b);
  return largest_k_triangle_at_most(triangle(w) - need, w) + 1;
}

}  // namespace
}  // namespace spand

extern "C" int spand_cwnd_opt(uint32_t wc_segments, uint64_t transfer_segments, uint32_t b,
                              int variant, int shift, spand_cwnd_result* out) {
  using spand::triangle;
  if (out == nullptr || wc_segments == 0 || b == 0 ||
      (variant != SPAND_LOSS_FREE && variant != SPAND_THEOREM2)) {
    return SPAND_EINVAL;
  }
  if (wc_segments > SPAND_WC_MAX_SEGMENTS) return SPAND_ERANGE;

  const uint64_t w = wc_segments;
  const uint64_t epoch_start = (w + 1) / 2;
  // Eq. 1: F_E = b * S(floor((W + 1) / 2)) + 2W + 1.
  uint64_t epoch_segments = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(b), triangle(w) - triangle(epoch_start - 1),
                             &epoch_segments) ||
      __builtin_add_overflow(epoch_segments, 2 * w + 1, &epoch_segments)) {
    return SPAND_ERANGE;
  }

  spand_cwnd_result res{};
  res.epoch_segments = epoch_segments;
  if (transfer_segments == 0) {
    *out = res;
    return SPAND_OK;
  }
  const uint64_t r =
      transfer_segments - spand::div_u64(transfer_segments, epoch_segments) * epoch_segments;
  res.residual_segments = r;

  if (r == 0) {
    // Whole epochs only: the first thing sent is an epoch, which Eq. 1 starts at
    // floor((W + 1) / 2). Eq. 2 with r = F_E gives the same m; nothing to shift.
    res.m = static_cast<uint32_t>(epoch_start);
    res.cwnd_opt = res.m;
    res.flags = SPAND_CWND_WHOLE_EPOCHS;
    *out = res;
    return SPAND_OK;
  }

  uint64_t m = 0;
  if (variant == SPAND_LOSS_FREE) {
    m = spand::eq3_m(w, r, b);
    if (m == 0) res.flags |= SPAND_CWND_FALLBACK_THEOREM2;
  }
  if (m == 0) m = spand::eq2_m(w, r, b);

  // Eq. 4: Delta = floor((b S(m) - r) / (b (W - m + 1))) = floor((S(m) - ceil(r / b)) / (W - m +
  // 1)) (nested floor division). It only lowers the window: defined as 0 when b S(m) < r (Eq. 2
  // leaning on the loss part) or m = W + 1 (no ramp, the denominator is 0).
  uint64_t delta = 0;
  if (shift != 0 && m <= w) {
    const uint64_t ramp_segments = triangle(w) - triangle(m - 1);
    const uint64_t need = spand::div_ceil(r, b);
    if (ramp_segments >= need) delta = spand::div_u64(ramp_segments - need, w - m + 1);
  }
  uint64_t cwnd = m - delta;
  if (cwnd > w) {
    cwnd = w;
    res.flags |= SPAND_CWND_CAPPED_AT_WC;
  }
  res.m = static_cast<uint32_t>(m);
  res.delta = static_cast<uint32_t>(delta);
  res.cwnd_opt = static_cast<uint32_t>(cwnd);
  *out = res;
  return SPAND_OK;
}
