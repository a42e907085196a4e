// The cwnd replica, the steps every ACK and data segment take (tracker.cpp calls them): growth per
// ACK, restart after idle, the flight that bounds it. Inline, so a build without LTO inlines them
// too; the cut at a loss, rounds and the measured decrease are in tracker_cwnd.cpp.
#pragma once

#include "dataplane/tracker_internal.hpp"

namespace spand {

namespace tracker_detail {

// The replica is a lower bound that the sender's own flights pull up (bound_cwnd_by_flight): it
// decreases by Reno's 1/2 at a loss and grows by half a segment per window of ACKs, the slowest a
// common sender goes (CUBIC's Reno-friendly rate at small windows is about 0.53). Any sender that
// grows faster or cuts less (CUBIC 0.7, Scalable TCP 7/8) shows it in the next clean flight, while
// a replica that ran ahead of a slower sender would never come back down. Measured against the
// kernel's cwnd in the lab (tests/lab), this beat following the measured decrease.
constexpr uint32_t kLossBetaPermille = 500;
constexpr uint32_t kGrowthAlphaPermille = 500;

}  // namespace tracker_detail

// An ACK of new data (`acked` bytes, up to `ack`) for direction d.
inline void Tracker::cwnd_on_ack(Flow& f, Dir d, uint32_t ack, uint32_t acked, bool sacks_above) {
  using namespace tracker_detail;
  HalfFlow h = f.h(d);
  const uint32_t mss = h.s.smss ? h.s.smss : kDefaultMss;
  const uint32_t acked_q16 = uint32_t(std::min<uint64_t>(uint64_t(acked) * kQ16 / mss, 1u << 24));
  switch (h.c.cc) {
    case CcState::kFastRecovery:
      if (seq_ge(ack, loss(h).recover)) {  // full ACK: deflate to ssthresh
        h.c.cc = CcState::kCongestionAvoidance;
        h.s.cwnd_q16 = clamp_cwnd(uint64_t(h.s.ssthresh_seg) * kQ16);
        // The decrease is read on a round wholly after recovery.
        if (h.c.flags & kHfMdPending) start_round(h);
        // A full ACK that still SACKs data above a hole: Linux leaves recovery and enters it
        // again on this ACK, even when the hole's resend went out during the first recovery
        // (then no new resend shows it). Measured on the lab captures: loss events exact
        // 27/30 -> 29/30 (reno) and 27/30 -> 30/30 (cubic).
        if (sacks_above) start_loss_event(f, d, false);
      }
      break;
    case CcState::kTimeoutRecovery:
      h.s.cwnd_q16 = clamp_cwnd(uint64_t(h.s.cwnd_q16) + acked_q16);
      if (seq_ge(ack, loss(h).recover)) {
        h.c.cc = h.s.cwnd_q16 >= uint32_t(h.s.ssthresh_seg) * kQ16 ? CcState::kCongestionAvoidance
                                                                   : CcState::kSlowStart;
      }
      break;
    case CcState::kSlowStart:
      h.s.cwnd_q16 = clamp_cwnd(uint64_t(h.s.cwnd_q16) + acked_q16);
      if (h.s.cwnd_q16 >= uint32_t(h.s.ssthresh_seg) * kQ16) h.c.cc = CcState::kCongestionAvoidance;
      break;
    case CcState::kCongestionAvoidance:
      // kGrowthAlphaPermille segments per window of ACKs.
      h.s.cwnd_q16 = clamp_cwnd(h.s.cwnd_q16 + uint64_t(acked_q16) * kQ16 * kGrowthAlphaPermille /
                                                   1000 / std::max(h.s.cwnd_q16, kQ16));
      break;
  }
  if (seq_ge(ack, h.s.round_end)) end_round(f, d);
}

// Restart after idle (RFC 5681 4.1): nothing in flight for longer than an RTO.
inline void Tracker::restart_after_idle(HalfFlow h, uint32_t now_us) {
  using namespace tracker_detail;
  if (h.c.snd_max == h.c.snd_una && h.s.last_send_us && now_us - h.s.last_send_us > rto_us(h) &&
      h.c.cc != CcState::kTimeoutRecovery) {
    const uint32_t rw = clamp_cwnd(uint64_t(cfg_.restart_window_segments) * kQ16);
    if (h.s.cwnd_q16 > rw) h.s.cwnd_q16 = rw;
  }
}

// Flight and rounds after a segment left: the replica never holds less than what the sender had
// in flight.
inline void Tracker::bound_cwnd_by_flight(HalfFlow h, bool below) {
  using namespace tracker_detail;
  const uint32_t flight = flight_segments(h);
  h.s.max_flight_seg = std::max<uint16_t>(h.s.max_flight_seg, sat16(flight));
  // The flight bounds cwnd from below only when new data goes out (the sender's window allowed
  // it), and not while the receiver holds out-of-order data (duplicate ACKs, SACK blocks):
  // limited transmit (RFC 3042) and SACK accounting let snd_max - snd_una exceed cwnd by the
  // segments the receiver already has. The same clean flights measure the decrease.
  if ((h.c.cc == CcState::kSlowStart || h.c.cc == CcState::kCongestionAvoidance) && !below &&
      h.c.dupacks == 0 && !(h.c.flags & kHfSackHoles)) {
    if (uint64_t(flight) * kQ16 > h.s.cwnd_q16) h.s.cwnd_q16 = clamp_cwnd(uint64_t(flight) * kQ16);
    h.s.round_flight_seg = std::max<uint16_t>(h.s.round_flight_seg, sat16(flight));
  }
  if (flight + 1 >= cwnd_segments(h)) h.c.flags |= kHfRoundLimited;
}

// A new segment of a direction that has lost before (sender identification needs two losses, so
// the first one's LossState holds the counts): sent on the ACK clock, or on a timer of its own
// (sender_id.hpp, kPacedGapFlightDivisor), counted from the last ACK of any kind (in recovery an
// ACK-clocked sender answers duplicate ACKs) and the previous segment. Not a send from idle,
// which follows the application.
inline void Tracker::note_send_clock(HalfFlow h, uint32_t now_us) {
  if (h.c.loss == 0 || h.r.srtt_us == 0 || h.c.snd_max == h.c.snd_una) return;
  SenderReadings& r = pool_.at(h.c.loss).sender;
  const uint32_t last_us = std::max(h.s.last_send_us, r.last_ack_us);
  const bool paced =
      int32_t(now_us - last_us) > 0 &&
      uint64_t(now_us - last_us) * kPacedGapFlightDivisor * flight_segments(h) >= h.r.srtt_us;
  if (r.sends_clocked == UINT16_MAX || r.sends_paced == UINT16_MAX) {
    r.sends_clocked /= 2;
    r.sends_paced /= 2;
  }
  ++(paced ? r.sends_paced : r.sends_clocked);
}

}  // namespace spand
