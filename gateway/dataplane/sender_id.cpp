// The sender's flavour from its readings (sender_id.hpp): pacing first, since a paced sender's
// flights do not follow its window; then the decrease rule most readings agree with.
#include "dataplane/sender_id.hpp"

#include <algorithm>

namespace spand {

uint8_t decrease_consistency(uint32_t before_seg, uint32_t after_seg) {
  if (before_seg == 0 || after_seg * 1000 <= before_seg * kMdFloorPermille) return 0;
  if (after_seg * 1000 >= before_seg * kMdNonePermille) return kDecNone;
  const uint32_t predicted[3] = {std::max<uint32_t>(before_seg / 2, 2),                     // Reno
                                 std::max<uint32_t>(before_seg * kCubicBetaQ10 / 1024, 2),  // CUBIC
                                 before_seg > kScalableLegacySegments
                                     ? before_seg - before_seg / 8  // Scalable TCP
                                     : std::max<uint32_t>(before_seg / 2, 2)};
  uint32_t dist[3];
  for (int i = 0; i < 3; ++i) {
    dist[i] = predicted[i] > after_seg ? predicted[i] - after_seg : after_seg - predicted[i];
  }
  const uint32_t nearest = std::min({dist[0], dist[1], dist[2]});
  uint8_t bits = 0;
  uint32_t chosen = 0;          // the nearest prediction
  uint32_t other = UINT32_MAX;  // distance of the nearest prediction different from it
  for (int i = 0; i < 3; ++i) {
    if (dist[i] == nearest) {
      // Two different predictions equally near: the reading cannot choose between them.
      if (bits && predicted[i] != chosen) return 0;
      bits |= uint8_t(1u << i);
      chosen = predicted[i];
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (predicted[i] != chosen) other = std::min(other, dist[i]);
  }
  // Every rule predicts the same window (small windows): nothing to choose. Else the flight is
  // the window to within a segment (one in transit, one of growth): a reading chooses only when
  // the next different prediction is at least kDecreaseMarginSegments further.
  if (other == UINT32_MAX || other - nearest < kDecreaseMarginSegments) return 0;
  return bits;
}

SenderKind classify_sender(uint32_t loss_events, const SenderReadings& r) {
  if (loss_events < 2) return SenderKind::kUnknown;
  const uint32_t sends = uint32_t(r.sends_clocked) + r.sends_paced;
  if (sends >= kPacedMinSends && uint32_t(r.sends_paced) * kPacedShareDivisor >= sends) {
    return SenderKind::kBbr;
  }
  // A window-based sender: the rule most decrease readings agree with, if more than half do
  // ("none" readings, an undone reduction or a window that grew back at once, say nothing).
  // Below 16 segments Scalable TCP is Reno, so a tie between the two is Reno-like: the wire
  // cannot tell them apart.
  const uint32_t reno = r.consistent[0], cubic = r.consistent[1], scalable = r.consistent[2];
  const uint32_t best = std::max({reno, cubic, scalable});
  const uint32_t decreases = uint32_t(r.readings) - r.consistent[3];
  if (best == 0 || 2 * best <= decreases) return SenderKind::kUnknown;
  if (reno == best && cubic != best) return SenderKind::kRenoLike;  // scalable == best: legacy
  if (cubic == best && reno != best && scalable != best) return SenderKind::kCubic;
  if (scalable == best && reno != best && cubic != best) return SenderKind::kScalable;
  return SenderKind::kUnknown;
}

}  // namespace spand
