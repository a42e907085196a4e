// spand_cwnd_opt against the paper's worked example, against a brute-force search over m
// written here from DESIGN.md Eq. 1-4 (loops, no closed forms), and at its edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spand.h"

namespace {

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

struct Expected {
  uint64_t m = 0;
  uint64_t delta = 0;
  uint64_t cwnd_opt = 0;
  uint32_t flags = 0;
};

// The brute force for one (W_c, b): suffix[m] = sum_{i=m}^{W} i by a running sum, the epoch by
// Eq. 1, and for a residual r a linear scan down from the top of m's range.
class BruteForce {
 public:
  BruteForce(uint64_t w, uint64_t b) : w_(w), b_(b), suffix_(w + 2, 0) {
    for (uint64_t m = w; m >= 1; --m) suffix_[m] = suffix_[m + 1] + m;
    epoch_ = 0;
    for (uint64_t x = (w + 1) / 2; x <= w; ++x) epoch_ += b * x;
    epoch_ += 2 * w + 1;
  }

  uint64_t epoch() const { return epoch_; }

  Expected solve(uint64_t r, int variant, bool shift) const {
    Expected e;
    if (r == 0) {  // documented: whole epochs start where Eq. 1's epoch starts
      e.m = e.cwnd_opt = (w_ + 1) / 2;
      e.flags = SPAND_CWND_WHOLE_EPOCHS;
      return e;
    }
    if (variant == SPAND_LOSS_FREE) {  // Eq. 3
      for (uint64_t m = w_; m >= 1; --m) {
        if (b_ * suffix_[m] >= r) {
          e.m = m;
          break;
        }
      }
      if (e.m == 0) e.flags |= SPAND_CWND_FALLBACK_THEOREM2;
    }
    if (e.m == 0) {  // Eq. 2
      for (uint64_t m = w_ + 1; m >= 1; --m) {
        if (b_ * suffix_[m] + (2 * w_ + 1) >= r) {
          e.m = m;
          break;
        }
      }
    }
    // Eq. 4, only lowering the window, undefined (0) without a ramp.
    if (shift && e.m <= w_ && b_ * suffix_[e.m] >= r) {
      e.delta = (b_ * suffix_[e.m] - r) / (b_ * (w_ - e.m + 1));
    }
    e.cwnd_opt = e.m - e.delta;
    if (e.cwnd_opt > w_) {
      e.cwnd_opt = w_;
      e.flags |= SPAND_CWND_CAPPED_AT_WC;
    }
    return e;
  }

 private:
  uint64_t w_;
  uint64_t b_;
  std::vector<uint64_t> suffix_;
  uint64_t epoch_;
};

spand_cwnd_result call(uint32_t wc, uint64_t f, uint32_t b, int variant = SPAND_LOSS_FREE,
                       int shift = 1) {
  spand_cwnd_result res{};
  EXPECT_EQ(spand_cwnd_opt(wc, f, b, variant, shift, &res), SPAND_OK)
      << "wc=" << wc << " f=" << f << " b=" << b;
  return res;
}

TEST(CwndOpt, PaperWorkedExample) {
  // DESIGN.md, Fig. 4 of the paper: b = 1, W_c = 10, F = 11. By hand: F_E = (5 + ... + 10) +
  // 21 = 66, r = 11; sum_{9..10} = 19 >= 11 and sum_{10..10} = 10 < 11, so m = 9; Delta =
  // floor((19 - 11) / 2) = 4; cwnd_opt = 9 - 4 = 5.
  const spand_cwnd_result res = call(10, 11, 1);
  EXPECT_EQ(res.epoch_segments, 66u);
  EXPECT_EQ(res.residual_segments, 11u);
  EXPECT_EQ(res.m, 9u);
  EXPECT_EQ(res.delta, 4u);
  EXPECT_EQ(res.cwnd_opt, 5u);
  EXPECT_EQ(res.flags, 0u);

  const spand_cwnd_result no_shift = call(10, 11, 1, SPAND_LOSS_FREE, 0);
  EXPECT_EQ(no_shift.m, 9u);
  EXPECT_EQ(no_shift.delta, 0u);
  EXPECT_EQ(no_shift.cwnd_opt, 9u);

  // Theorem 2 on the same input: 2 W_c + 1 = 21 >= 11 already, so m = W_c + 1, capped.
  const spand_cwnd_result t2 = call(10, 11, 1, SPAND_THEOREM2);
  EXPECT_EQ(t2.m, 11u);
  EXPECT_EQ(t2.cwnd_opt, 10u);
  EXPECT_EQ(t2.flags, static_cast<uint32_t>(SPAND_CWND_CAPPED_AT_WC));
}

TEST(CwndOpt, HandComputedDelayedAcks) {
  // b = 2, W_c = 10, F = 50: F_E = 2 * 45 + 21 = 111, r = 50, need sum >= 25: sum_{8..10} =
  // 27, sum_{9..10} = 19, so m = 8; Delta = floor((54 - 50) / (2 * 3)) = 0.
  const spand_cwnd_result res = call(10, 50, 2);
  EXPECT_EQ(res.epoch_segments, 111u);
  EXPECT_EQ(res.m, 8u);
  EXPECT_EQ(res.delta, 0u);
  EXPECT_EQ(res.cwnd_opt, 8u);
  // F = 111 + 50 has the same residual, so the same answer.
  EXPECT_EQ(call(10, 161, 2).cwnd_opt, 8u);
}

TEST(CwndOpt, AgreesWithBruteForce) {
  constexpr uint64_t kMaxWc = 500;
  constexpr uint64_t kMaxF = 5000;
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  for (uint32_t b : {1u, 2u}) {
    for (uint64_t w = 1; w <= kMaxWc; ++w) {
      const BruteForce brute(w, b);
      const uint64_t residuals = std::min<uint64_t>(brute.epoch(), kMaxF + 1);
      for (int variant : {SPAND_LOSS_FREE, SPAND_THEOREM2}) {
        for (bool shift : {true, false}) {
          // The answer depends on F only through r = F mod F_E: solve each r once.
          std::vector<Expected> by_residual(residuals);
          for (uint64_t r = 0; r < residuals; ++r) by_residual[r] = brute.solve(r, variant, shift);
          for (uint64_t f = 1; f <= kMaxF; ++f) {
            spand_cwnd_result res{};
            const int rc = spand_cwnd_opt(static_cast<uint32_t>(w), f, b, variant, shift, &res);
            const Expected& e = by_residual[f % brute.epoch()];
            ++checked;
            const bool ok = rc == SPAND_OK && res.epoch_segments == brute.epoch() &&
                            res.residual_segments == f % brute.epoch() && res.m == e.m &&
                            res.delta == e.delta && res.cwnd_opt == e.cwnd_opt &&
                            res.flags == e.flags && res.cwnd_opt >= 1 && res.cwnd_opt <= w;
            if (!ok && ++mismatches <= 10) {
              ADD_FAILURE() << "b=" << b << " W_c=" << w << " F=" << f << " variant=" << variant
                            << " shift=" << shift << ": got m=" << res.m << " delta=" << res.delta
                            << " cwnd_opt=" << res.cwnd_opt << " flags=" << res.flags
                            << " rc=" << rc << "; want m=" << e.m << " delta=" << e.delta
                            << " cwnd_opt=" << e.cwnd_opt << " flags=" << e.flags;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(checked, 2u * kMaxWc * 2u * 2u * kMaxF);
}

TEST(CwndOpt, EdgeWcZeroAndBadArguments) {
  spand_cwnd_result res{};
  EXPECT_EQ(spand_cwnd_opt(0, 11, 1, SPAND_LOSS_FREE, 1, &res), SPAND_EINVAL);
  EXPECT_EQ(spand_cwnd_opt(10, 11, 0, SPAND_LOSS_FREE, 1, &res), SPAND_EINVAL);
  EXPECT_EQ(spand_cwnd_opt(10, 11, 1, 2, 1, &res), SPAND_EINVAL);
  EXPECT_EQ(spand_cwnd_opt(10, 11, 1, -1, 1, &res), SPAND_EINVAL);
  EXPECT_EQ(spand_cwnd_opt(10, 11, 1, SPAND_LOSS_FREE, 1, nullptr), SPAND_EINVAL);
  EXPECT_EQ(spand_cwnd_opt(UINT32_MAX, 11, 1, SPAND_LOSS_FREE, 1, &res), SPAND_ERANGE);
  // F_E = b * sum_{2^31-1}^{2^32-2} x + ... is about 3/8 * b * 2^64: past 64 bits for b = 3.
  EXPECT_EQ(spand_cwnd_opt(SPAND_WC_MAX_SEGMENTS, 11, 3, SPAND_LOSS_FREE, 1, &res), SPAND_ERANGE);
  EXPECT_EQ(spand_cwnd_opt(SPAND_WC_MAX_SEGMENTS, 11, 2, SPAND_LOSS_FREE, 1, &res), SPAND_OK);

  EXPECT_STREQ(spand_strerror(SPAND_OK), "success");
  EXPECT_NE(std::string(spand_strerror(SPAND_EINVAL)), spand_strerror(SPAND_ERANGE));
  EXPECT_STREQ(spand_strerror(12345), "unknown error");
}

TEST(CwndOpt, EdgeWcOne) {
  // W_c = 1: F_E = b + 3, and every transfer starts with the one segment the path takes.
  for (uint32_t b : {1u, 2u, 7u}) {
    for (uint64_t f = 1; f <= 50; ++f) {
      for (int variant : {SPAND_LOSS_FREE, SPAND_THEOREM2}) {
        const spand_cwnd_result res = call(1, f, b, variant);
        EXPECT_EQ(res.epoch_segments, b + 3u);
        EXPECT_EQ(res.cwnd_opt, 1u) << "b=" << b << " F=" << f;
      }
    }
  }
}

TEST(CwndOpt, EdgeTransferZero) {
  const spand_cwnd_result res = call(10, 0, 1);
  EXPECT_EQ(res.epoch_segments, 66u);
  EXPECT_EQ(res.residual_segments, 0u);
  EXPECT_EQ(res.m, 0u);
  EXPECT_EQ(res.delta, 0u);
  EXPECT_EQ(res.cwnd_opt, 0u);
  EXPECT_EQ(res.flags, 0u);
}

TEST(CwndOpt, EdgeMultipleOfEpoch) {
  // r = 0: m = floor((W_c + 1) / 2), the start of an epoch; the same for both variants, and the
  // same m that Eq. 2 gives for r = F_E (b * S(m) + 2W + 1 >= b * S(floor((W+1)/2)) + 2W + 1).
  for (uint32_t w : {1u, 2u, 10u, 11u, 499u}) {
    for (uint32_t b : {1u, 2u}) {
      for (uint64_t k : {1u, 2u, 1000u}) {
        const uint64_t epoch = call(w, 1, b).epoch_segments;
        for (int variant : {SPAND_LOSS_FREE, SPAND_THEOREM2}) {
          const spand_cwnd_result res = call(w, k * epoch, b, variant);
          EXPECT_EQ(res.residual_segments, 0u);
          EXPECT_EQ(res.m, (w + 1) / 2);
          EXPECT_EQ(res.delta, 0u);
          EXPECT_EQ(res.cwnd_opt, (w + 1) / 2);
          EXPECT_EQ(res.flags, static_cast<uint32_t>(SPAND_CWND_WHOLE_EPOCHS));
        }
      }
    }
  }
  EXPECT_EQ(call(10, 66, 1).cwnd_opt, 5u);
}

TEST(CwndOpt, LossFreeFallsBackToTheorem2) {
  // b = 1, W_c = 10: a loss-free ramp 1..10 carries 55 segments, F_E = 66. r = 56 has no
  // loss-free m; Eq. 2 needs sum_{m..10} >= 56 - 21 = 35: sum_{6..10} = 40, sum_{7..10} = 34,
  // so m = 6, and no shift because the ramp alone is short of r.
  const spand_cwnd_result res = call(10, 56, 1);
  EXPECT_EQ(res.m, 6u);
  EXPECT_EQ(res.delta, 0u);
  EXPECT_EQ(res.cwnd_opt, 6u);
  EXPECT_EQ(res.flags, static_cast<uint32_t>(SPAND_CWND_FALLBACK_THEOREM2));
  // r = 55 is still loss-free from m = 1.
  EXPECT_EQ(call(10, 55, 1).m, 1u);
}

// For inputs too large for the brute force: check the defining inequalities with 128-bit sums.
void check_definition(uint32_t wc, uint64_t f, uint32_t b, int variant) {
  spand_cwnd_result res{};
  ASSERT_EQ(spand_cwnd_opt(wc, f, b, variant, 1, &res), SPAND_OK);
  const u128 w = wc;
  auto sum_from = [&](u128 m) -> u128 { return (w * (w + 1) - (m - 1) * m) / 2; };
  const u128 epoch = b * sum_from((w + 1) / 2) + 2 * w + 1;
  ASSERT_EQ(static_cast<u128>(res.epoch_segments), epoch);
  const u128 r = f % epoch;
  ASSERT_EQ(static_cast<u128>(res.residual_segments), r);
  if (f == 0) {
    ASSERT_EQ(res.cwnd_opt, 0u);
    return;
  }
  ASSERT_GE(res.cwnd_opt, 1u);
  ASSERT_LE(res.cwnd_opt, wc);
  if (r == 0) return;
  const u128 m = res.m;
  const u128 loss = 2 * w + 1;
  const bool eq3 = variant == SPAND_LOSS_FREE && !(res.flags & SPAND_CWND_FALLBACK_THEOREM2);
  if (eq3) {
    ASSERT_LE(m, w);
    ASSERT_GE(b * sum_from(m), r) << "wc=" << wc << " f=" << f;
    if (m < w) {
      ASSERT_LT(b * sum_from(m + 1), r) << "wc=" << wc << " f=" << f;
    }
  } else {
    if (variant == SPAND_LOSS_FREE) {
      ASSERT_LT(b * sum_from(1), r);
    }
    ASSERT_LE(m, w + 1);
    ASSERT_GE(b * sum_from(m) + loss, r);
    if (m <= w) {
      ASSERT_LT(b * sum_from(m + 1) + loss, r);
    }
  }
  if (m <= w && b * sum_from(m) >= r) {
    const i128 slack = static_cast<i128>(b * sum_from(m)) - static_cast<i128>(r);
    ASSERT_EQ(static_cast<i128>(res.delta), slack / static_cast<i128>(b * (w - m + 1)));
  } else {
    ASSERT_EQ(res.delta, 0u);
  }
}

TEST(CwndOpt, LargeValuesSatisfyTheDefinition) {
  std::mt19937_64 rng(20240501);  // fixed seed: the same cases every run
  std::uniform_int_distribution<uint32_t> wc_dist(1, SPAND_WC_MAX_SEGMENTS);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t wc = wc_dist(rng) >> (rng() % 32);
    const uint64_t f = rng() >> (rng() % 64);
    for (uint32_t b : {1u, 2u}) {
      for (int variant : {SPAND_LOSS_FREE, SPAND_THEOREM2}) {
        check_definition(wc == 0 ? 1 : wc, f, b, variant);
        if (HasFatalFailure()) return;
      }
    }
  }
  for (uint32_t wc : {SPAND_WC_MAX_SEGMENTS, SPAND_WC_MAX_SEGMENTS - 1, 1u << 31, 65535u}) {
    for (uint64_t f : {uint64_t{1}, UINT64_MAX, UINT64_MAX / 3, uint64_t{1} << 62}) {
      for (uint32_t b : {1u, 2u}) {
        check_definition(wc, f, b, SPAND_LOSS_FREE);
        check_definition(wc, f, b, SPAND_THEOREM2);
      }
    }
  }
  // Large b with a small window: F_E grows with b, nothing overflows.
  check_definition(10, UINT64_MAX, UINT32_MAX, SPAND_LOSS_FREE);
  check_definition(10, UINT64_MAX, UINT32_MAX, SPAND_THEOREM2);
}

TEST(SegmentsForBytes, CeilingDivision) {
  EXPECT_EQ(spand_segments_for_bytes(0, 1460), 0u);
  EXPECT_EQ(spand_segments_for_bytes(1, 1460), 1u);
  EXPECT_EQ(spand_segments_for_bytes(1460, 1460), 1u);
  EXPECT_EQ(spand_segments_for_bytes(1461, 1460), 2u);
  EXPECT_EQ(spand_segments_for_bytes(16000, 1460), 11u);  // 10 * 1460 = 14600 < 16000
  EXPECT_EQ(spand_segments_for_bytes(UINT64_MAX, 1), UINT64_MAX);
  EXPECT_EQ(spand_segments_for_bytes(UINT64_MAX, 2), uint64_t{1} << 63);
  EXPECT_EQ(spand_segments_for_bytes(1000, 0), 0u);
}

TEST(PacingRate, BitsAndBytesPerSecond) {
  // 10 segments of 1000 bytes per 100 ms = 100 000 bytes/s = 800 000 bit/s.
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(10, 1000, 100000.0), 100000u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 1000, 100000.0), 800000u);
  // Rounded down: 1 byte per 3 us = 333 333.3 bytes/s; 8 bits per 3 us = 2 666 666.7 bit/s.
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(1, 1, 3.0), 333333u);
  EXPECT_EQ(spand_pacing_rate_bps(1, 1, 3.0), 2666666u);
  // A fractional srtt: 1460 bytes per 0.5 us = 2.92e9 bytes/s.
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(1, 1460, 0.5), 2920000000u);
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(5, 1448, 40000.0), 181000u);
}

TEST(PacingRate, InvalidInputsGiveZeroAndHugeSaturates) {
  EXPECT_EQ(spand_pacing_rate_bps(0, 1460, 1000.0), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 0, 1000.0), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 1460, 0.0), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 1460, -5.0), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 1460, std::numeric_limits<double>::quiet_NaN()), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(10, 1460, std::numeric_limits<double>::infinity()), 0u);
  EXPECT_EQ(spand_pacing_rate_bps(UINT32_MAX, UINT32_MAX, 1e-9), UINT64_MAX);
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(UINT32_MAX, UINT32_MAX, 1.0), UINT64_MAX);
  // (2^32 - 1)^2 * 1e6 / 1e15 is about 18.4 billion: no saturation, exact integer path.
  EXPECT_EQ(spand_pacing_rate_bytes_per_s(UINT32_MAX, UINT32_MAX, 1e15), 18446744065u);
}

}  // namespace
