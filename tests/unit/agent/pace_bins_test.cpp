// The pacing-class bins shared by the sock_ops program and the agent (libspand/spand_maps.h): every
// rate maps to the highest bin whose rate does not exceed it, bins are at most 12.5 % apart,
// and class ids are distinct, under HTB's major and with the low four bits clear.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "spand_maps.h"

namespace {

TEST(PaceBins, MsbMatchesTheDefinition) {
  for (uint32_t x = 1; x < (1u << 20); x += 7) {
    uint32_t msb = 0;
    while ((x >> msb) > 1) ++msb;
    ASSERT_EQ(spand_msb32(x), msb) << x;
  }
  EXPECT_EQ(spand_msb32(0xffffffffu), 31u);
}

TEST(PaceBins, RateMapsToHighestBinNotAboveIt) {
  // Bin rates from their definition: 8 per octave, (8 + m) / 8 of the octave's base.
  std::vector<double> edges;
  for (uint32_t e = SPAND_PACE_MIN_EXP; e < 32; ++e)
    for (uint32_t m = 0; m < 8; ++m) edges.push_back(std::ldexp(8.0 + m, int(e) - 3));
  ASSERT_EQ(edges.size(), SPAND_PACE_BINS);
  for (uint32_t b = 0; b < SPAND_PACE_BINS; ++b)
    ASSERT_EQ(double(spand_pace_bin_rate(b)), edges[b]) << b;
  for (uint64_t r = 1000; r <= 0xffffffffull; r = r * 1009 / 1000 + 1) {
    const uint32_t bin = spand_pace_bin(uint32_t(r));
    ASSERT_LT(bin, SPAND_PACE_BINS);
    if (r < edges[0]) {
      EXPECT_EQ(bin, 0u);  // below 8 KiB/s: the slowest class
      continue;
    }
    ASSERT_LE(double(spand_pace_bin_rate(bin)), double(r)) << r;
    if (bin + 1 < SPAND_PACE_BINS) {
      ASSERT_GT(edges[bin + 1], double(r)) << r;
    }
    ASSERT_GT(double(spand_pace_bin_rate(bin)), 0.875 * double(r)) << r;
  }
}

TEST(PaceBins, ClassIdsAreDistinctAndLeaveThePriorityBandAlone) {
  std::set<uint32_t> ids;
  for (uint32_t b = 0; b < SPAND_PACE_BINS; ++b) {
    for (uint32_t c = 0; c < SPAND_PACE_COPIES; ++c) {
      const uint32_t id = spand_pace_classid(b, c);
      EXPECT_EQ(id >> 16, SPAND_HTB_MAJOR);
      EXPECT_EQ(id & 0xfu, 0u);
      EXPECT_NE(id & 0xffffu, 0u);  // minor 0 would name the qdisc itself (direct)
      ids.insert(id);
    }
  }
  EXPECT_EQ(ids.size(), size_t(SPAND_PACE_BINS) * SPAND_PACE_COPIES);
}

}  // namespace
