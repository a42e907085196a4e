// Sender identification's rules (gateway/dataplane/sender_id.hpp), table-driven. Expected values
// come from the congestion controls' own rules: Linux tcp_reno_ssthresh max(W/2, 2), CUBIC's
// beta 717/1024, Scalable TCP (Kelly 2003) W - W/8 above 16 segments and Reno below.
#include "dataplane/sender_id.hpp"

#include <gtest/gtest.h>

namespace spand::test {
namespace {

TEST(SenderId, DecreaseReadingIsConsistentWithTheNearestRule) {
  struct Case {
    uint32_t before, after;
    uint8_t want;
  };
  const Case cases[] = {
      {40, 20, kDecReno},                // Reno halves
      {40, 21, kDecReno},                // one segment of growth or in transit
      {40, 28, kDecCubic},               // 40 x 717/1024 = 28
      {40, 35, kDecScalable},            // 40 - 5
      {40, 34, kDecScalable},            // CUBIC's 28 is six away
      {40, 24, 0},                       // halfway between Reno's 20 and CUBIC's 28: no choice
      {20, 14, kDecCubic},               // 20 x 717/1024 = 14
      {20, 18, kDecScalable},            // 20 - 2
      {20, 16, 0},                       // CUBIC 14 and Scalable 18 equally near
      {12, 6, kDecReno | kDecScalable},  // below the legacy window Scalable TCP is Reno
      {12, 8, kDecCubic},                // 12 x 717/1024 = 8, Reno 6: two apart
      {9, 6, kDecCubic},                 // 9 x 717/1024 = 6, Reno 4
      {8, 4, 0},                         // Reno 4, CUBIC 5: one segment apart, no choice
      {8, 5, 0},
      {4, 2, 0},           // both rules give 2
      {40, 39, kDecNone},  // no decrease (BBR, an undone reduction)
      {40, 38, kDecNone},  // 0.95
      {40, 12, 0},         // 0.3: application limits, no reading
      {0, 5, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(decrease_consistency(c.before, c.after), c.want) << c.before << " -> " << c.after;
  }
}

SenderReadings readings(uint8_t reno, uint8_t cubic, uint8_t scalable, uint8_t none, uint8_t total,
                        uint16_t clocked = 0, uint16_t paced = 0) {
  SenderReadings r;
  r.readings = total;
  r.consistent[0] = reno;
  r.consistent[1] = cubic;
  r.consistent[2] = scalable;
  r.consistent[3] = none;
  r.sends_clocked = clocked;
  r.sends_paced = paced;
  return r;
}

TEST(SenderId, VerdictFromPacingThenTheDecreaseMostReadingsAgreeWith) {
  struct Case {
    uint32_t losses;
    SenderReadings r;
    SenderKind want;
  };
  const Case cases[] = {
      {1, readings(3, 0, 0, 0, 3), SenderKind::kUnknown},  // one loss: not enough
      {2, readings(0, 0, 0, 0, 0), SenderKind::kUnknown},  // no reading
      {2, readings(2, 0, 0, 0, 2), SenderKind::kRenoLike},
      {3, readings(1, 2, 0, 0, 3), SenderKind::kCubic},
      {2, readings(0, 0, 1, 0, 1), SenderKind::kScalable},
      {4, readings(1, 1, 0, 0, 2), SenderKind::kUnknown},   // a tie is no majority
      {4, readings(3, 0, 3, 0, 3), SenderKind::kRenoLike},  // all below 16: Reno-like
      {4, readings(3, 0, 4, 0, 4), SenderKind::kScalable},  // 7/8 once above 16
      {4, readings(0, 1, 0, 3, 4), SenderKind::kCubic},     // "none" readings abstain
      {4, readings(0, 0, 0, 3, 3), SenderKind::kUnknown},
      {5, readings(4, 0, 0, 0, 4, 75, 25), SenderKind::kBbr},  // a quarter of the sends paced
      {5, readings(4, 0, 0, 0, 4, 76, 24), SenderKind::kRenoLike},
      {5, readings(0, 0, 0, 0, 0, 5, 4), SenderKind::kUnknown},    // too few sends to judge
      {5, readings(0, 0, 0, 0, 0, 7, 3), SenderKind::kBbr},        // ten: enough
      {1, readings(0, 0, 0, 0, 0, 10, 90), SenderKind::kUnknown},  // paced, but one loss
  };
  for (const Case& c : cases) {
    EXPECT_EQ(classify_sender(c.losses, c.r), c.want)
        << c.losses << " " << int(c.r.consistent[0]) << int(c.r.consistent[1])
        << int(c.r.consistent[2]) << int(c.r.consistent[3]) << " paced " << c.r.sends_paced;
  }
  EXPECT_STREQ(sender_kind_name(SenderKind::kRenoLike), "reno");
  EXPECT_STREQ(sender_kind_name(SenderKind::kBbr), "bbr");
}

}  // namespace
}  // namespace spand::test
