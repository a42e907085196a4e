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

// A loss before the first full round after the previous recovery (a window of 7/8 often fills
// a small buffer again within a round trip): the decrease is read on the part of the round
// seen, for sender identification only (md_ratio and the decrease samples keep to full rounds).
// Called by start_loss_event (tracker_loss.cpp) before the loss's W_c sample and cwnd_on_loss.
void Tracker::read_cut_short_decrease(HalfFlow& h, LossState& l) {
  if ((h.flags & kHfMdPending) && h.cc == CcState::kCongestionAvoidance && h.round_flight_seg) {
    vote_decrease(l, h.round_flight_seg);
  }
}

// A loss event (tracker_loss.cpp): ssthresh = beta x cwnd (see kLossBetaPermille), then fast
// recovery, or one segment after a timeout.
void Tracker::cwnd_on_loss(HalfFlow& h, LossState& l, bool timeout) {
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
    // Over the whole segments of the window before the loss (a sender's window is a whole
    // number of segments; Linux keeps the fraction apart, in snd_cwnd_cnt), or over the
    // sender's largest clean flight in the round of the loss or the one before
    // (SenderReadings::before_seg, what sender identification reads) when that is one segment
    // less: the replica then ran a segment ahead of a sender that grew more slowly than it.
    // A flight further below is an application's limit, not the window. Lab truth_matrix.py,
    // 17 runs on paths b5_q2, b5_q1_qa, b35_q025 and b100_q05, each reading matched with the
    // kernel's recovery before it (cwnd leaving it over cwnd entering it): CUBIC readings
    // within 0.02 of the kernel's 480/583 -> 556/581 (97 lower than the kernel's -> 8, e.g.
    // 7/11 against 10 -> 7), without HyStart 514/618 -> 588/617; Reno and Scalable TCP
    // unchanged. A timeout restarts the window from one segment (before_seg 0): what follows
    // shows no decrease, and the kernel's readings leave out recoveries an RTO interrupted: no
    // reading.
    const uint32_t replica_seg = l.cwnd_before_loss_q16 / kQ16;
    const uint32_t shown = l.sender.before_seg;
    const uint32_t before = shown + 1 == replica_seg ? shown : replica_seg;
    if (shown == 0) {
      h.flags &= ~kHfMdPending;
    } else if (before >= 4) {  // as the kernel's readings (tests/lab/compare_truth.py)
      const uint64_t md = uint64_t(h.round_flight_seg) * 1000 / before;
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
