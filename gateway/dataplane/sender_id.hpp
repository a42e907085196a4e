// Sender identification (issue 15): which congestion control a sender runs, from what the wire
// shows after its losses. Three readings, gathered by the tracker once a direction has a
// LossState (tracker_cwnd.cpp, tracker.cpp) and judged here when the flow closes:
// - the multiplicative decrease at each loss: the window after recovery over the window before
//   it (Reno 1/2, CUBIC 0.7, Scalable TCP 7/8; BBR does not decrease);
// - the growth between two losses, in segments per round trip (Reno +1; CUBIC in its
//   Reno-friendly region about 0.5, Scalable TCP 0.01 x cwnd above its legacy window);
// - pacing: whether new segments leave on the ACK clock (within a small part of the RTT of the
//   last ACK or segment) or on a timer of their own, spread over the round trip (BBR).
// Thresholds and the lab measurements that chose them: docs/DESIGN.md, "Sender identification".
#pragma once

#include <cstdint>

namespace spand {

enum class SenderKind : uint8_t {
  kUnknown = 0,
  kRenoLike = 1,
  kCubic = 2,
  kScalable = 3,
  kBbr = 4,
};
inline constexpr int kSenderKinds = 5;
const char* sender_kind_name(SenderKind k);

// A decrease reading: the window before a loss and the flight after recovery, in whole segments
// (the sender's window is whole segments, so at small windows the rules' ratios round together).
// Each rule predicts the window after: Reno max(W/2, 2) (Linux tcp_reno_ssthresh), CUBIC
// max(W x 717/1024, 2) (Linux's beta), Scalable TCP W - W/8 above its legacy window of 16
// segments and Reno's below. The reading is consistent with the rules whose prediction is
// nearest to the flight seen, when every different prediction is at least two segments further
// (the flight is the window to within a segment): at windows under 9 Reno's and CUBIC's
// predictions are less than two segments apart, and no reading chooses between them.
// A flight of at least 0.95 W showed no decrease (BBR, an undone reduction); one under 0.3 W
// no reading (application limits).
inline constexpr uint32_t kScalableLegacySegments = 16;
inline constexpr uint32_t kCubicBetaQ10 = 717;
inline constexpr uint32_t kDecreaseMarginSegments = 2;
inline constexpr uint32_t kMdNonePermille = 950;
inline constexpr uint32_t kMdFloorPermille = 300;
enum DecreaseBit : uint8_t {
  kDecReno = 1 << 0,
  kDecCubic = 1 << 1,
  kDecScalable = 1 << 2,
  kDecNone = 1 << 3,
};
uint8_t decrease_consistency(uint32_t before_seg, uint32_t after_seg);

// A new segment is "paced" when it leaves later than srtt / (kPacedGapFlightDivisor x flight)
// after both the last ACK of new data and the sender's previous segment: a paced sender spreads
// its flight over the round trip (about srtt / flight between segments, or twice that in pairs),
// an ACK-clocked one answers an ACK at once (at a monitor near it: microseconds).
inline constexpr uint32_t kPacedGapFlightDivisor = 4;
// Paced when at least 1 / kPacedShareDivisor of enough (kPacedMinSends) such segments are. Lab
// (docs/DESIGN.md, "Sender identification"): 0.00-0.04 for Reno, CUBIC and Scalable TCP,
// 0.29-0.55 for BBR; a real trace of 2000s TCP with a 537 ms RTT (tcptrace_dsack.dmp) 0.21.
inline constexpr uint32_t kPacedShareDivisor = 4;
inline constexpr uint32_t kPacedMinSends = 10;

// What a direction gathered after its first loss (in its LossState: 20 bytes).
struct SenderReadings {
  uint8_t readings = 0;                // decrease readings (saturating, the counts below with it)
  uint8_t consistent[4]{};             // of them consistent with Reno, CUBIC, Scalable, no decrease
  uint16_t sends_clocked = 0;          // new segments sent on the ACK clock (halved with the other
  uint16_t sends_paced = 0;            // one when either saturates, so the share survives)
  uint16_t before_seg = 0;             // the window before the loss being read (0: none)
  uint16_t last_round_flight_seg = 0;  // the last full round's largest clean flight
  uint32_t last_ack_us = 0;            // the peer's last ACK (flow-relative time)
};

// The verdict, once the flow closes: unknown under two loss events.
SenderKind classify_sender(uint32_t loss_events, const SenderReadings& r);

}  // namespace spand
