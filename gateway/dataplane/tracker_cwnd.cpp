// The replica of the sender's congestion window (RFC 5681 with NewReno's recovery, RFC 6582),
// in 1/65536 segments: growth per ACK, the cut at a loss event, restart after idle, the flight
// that bounds it from below, rounds, and the measured decrease (md_ratio) read on the first full
// round after recovery.
#include "dataplane/tracker_cwnd.hpp"

namespace spand {

using namespace tracker_detail;

namespace {

// One decrease reading for sender identification (sender_id.hpp): the clean flight before the
// loss against the flight after recovery, in whole segments.
void vote_decrease(LossState& l, uint32_t after_seg) {
  const uint8_t bits = decrease_consistency(l.sender.before_seg, after_seg);
  SenderReadings& r = l.sender;
  if (bits == 0 || r.readings == UINT8_MAX) return;
  ++r.readings;
  for (int i = 0; i < 4; ++i) r.consistent[i] += (bits >> i) & 1;
}

}  // namespace

// A loss event (tracker_loss.cpp): ssthresh = beta x cwnd (see kLossBetaPermille), then fast
// recovery, or one segment after a timeout.
void Tracker::cwnd_on_loss(HalfFlow& h, LossState& l, bool timeout) {
  // A loss before the first full round after the previous recovery (a window of 7/8 often
  // fills a small buffer again within a round trip): the decrease is read on the part of the
  // round seen, for sender identification only (md_ratio and the decrease samples keep to full
  // rounds).
  if ((h.flags & kHfMdPending) && h.cc == CcState::kCongestionAvoidance && h.round_flight_seg) {
    vote_decrease(l, h.round_flight_seg);
  }
  if (h.cc != CcState::kFastRecovery && h.cc != CcState::kTimeoutRecovery) {
    l.cwnd_before_loss_q16 = h.cwnd_q16;
    l.recovery_from_ca = h.cc == CcState::kCongestionAvoidance;
    h.flags |= kHfMdPending;
    // The window before, for sender identification: the sender's largest clean flight in this
    // round or the last. The replica runs ahead of a sender that grows more slowly than it
    // (Scalable TCP near its legacy window: 25 against the kernel's 20 in the lab), and in slow
    // start past one that stopped (78 against 59). Without a clean flight since the last
    // recovery, the replica.
    const uint16_t flight_seg = std::max(h.round_flight_seg, l.sender.last_round_flight_seg);
    l.sender.before_seg = flight_seg ? flight_seg : sat16((h.cwnd_q16 + kQ16 / 2) / kQ16);
  }
  // A timeout restarts the window from one segment: what follows shows no decrease.
  if (timeout) l.sender.before_seg = 0;
  l.sender.last_round_flight_seg = 0;
  const uint64_t cwnd_before = h.cc == CcState::kFastRecovery || h.cc == CcState::kTimeoutRecovery
                                   ? l.cwnd_before_loss_q16
                                   : h.cwnd_q16;
  h.ssthresh_seg =
      sat16(std::max<uint32_t>(uint32_t(cwnd_before * kLossBetaPermille / 1000 / kQ16), 2));
  l.recover = h.snd_max;
  h.dupacks = 0;
  if (timeout) {
    h.cc = CcState::kTimeoutRecovery;
    h.cwnd_q16 = kQ16;
  } else {
    h.cc = CcState::kFastRecovery;
  }
}

void Tracker::end_round(Flow& f, Dir d) {
  HalfFlow& h = f.h(d);
  // Measured multiplicative decrease: the first full round after recovery against the window
  // before the loss (about 500 for Reno, 700 for CUBIC, 875 for Scalable TCP).
  if ((h.flags & kHfMdPending) && h.cc == CcState::kCongestionAvoidance &&
      (h.flags & kHfRoundLimited)) {
    LossState& l = loss(h);  // taken at the loss that set kHfMdPending
    if (l.cwnd_before_loss_q16 >= 4 * kQ16) {
      // Over the whole segments of the window before the loss: a sender's window is a whole
      // number of segments (Linux keeps the fraction apart, in snd_cwnd_cnt), and the
      // replica's fraction made every reading low. Lab (truth_matrix.py, 28 runs; the kernel's
      // cwnd leaving recovery over entering it): medians reno 0.458 -> 0.500 against the
      // kernel's 0.500, cubic 0.524 -> 0.571 against 0.600, Scalable TCP 0.468 -> 0.500 against
      // 0.500; stored pcaps/lab/cubic_3nets 0.624 -> 0.666 against 0.667.
      const uint64_t md = uint64_t(h.round_flight_seg) * 1000 / (l.cwnd_before_loss_q16 / kQ16);
      vote_decrease(l, h.round_flight_seg);
      // Outside (0.3, 0.95) the round showed no decrease (an undone recovery, a window that
      // grew back at once, application limits): no reading.
      if (md > 300 && md < 950) {
        l.md_permille = uint16_t(md);  // the record keeps the last; each one is a sample
        if (d == Dir::kS2C) {
          Sample s = base_sample(f, SampleKind::kDecrease);
          s.value = uint32_t(md);
          s.cwnd_limited = true;  // measured on a round that filled the window
          emit_.sample(s);
        }
      }
      h.flags &= ~kHfMdPending;
    }
  }
  LossState* l = loss_if_any(h);
  if (l && h.cc == CcState::kCongestionAvoidance)
    l->sender.last_round_flight_seg = h.round_flight_seg;
  start_round(h);
}

void Tracker::start_round(HalfFlow& h) {
  h.round_end = h.snd_max;
  h.round_flight_seg = 0;
  h.flags &= ~kHfRoundLimited;
}

}  // namespace spand
