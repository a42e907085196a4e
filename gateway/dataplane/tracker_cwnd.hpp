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
// Scalable TCP (the agent's BPF spand_scalable, Kelly 2003) grows by a = 0.01 segment per
// segment acked above its legacy window of 16, Reno below: from 17 to 49 segments that is
// 0.17-0.49 segments per window, slower than kGrowthAlphaPermille. There the replica grows no
// faster than it. Lab (tests/lab/truth_matrix.py, 2026-11-24, path b35_q025): a Scalable sender
// held 17 segments for five round trips after a recovery while the replica, at half a segment
// per window, reached 19 (W_c 18 against the kernel's 16); Reno and CUBIC there show their
// faster growth in their clean flights, which pull the replica up. (The legacy window:
// sender_id.hpp, kScalableLegacySegments.)
constexpr uint32_t kScalableAiPermille = 10;

// The replica's growth in congestion avoidance for acked_q16 segments acknowledged:
// kGrowthAlphaPermille segments per window of ACKs; above Scalable TCP's legacy window no more
// than its kScalableAiPermille per segment acked (see there).
inline uint64_t ca_growth_q16(uint32_t cwnd_q16, uint32_t acked_q16) {
  uint64_t grow_q16 =
      uint64_t(acked_q16) * kQ16 * kGrowthAlphaPermille / 1000 / std::max(cwnd_q16, kQ16);
  if (cwnd_q16 > kScalableLegacySegments * kQ16)
    grow_q16 = std::min<uint64_t>(grow_q16, uint64_t(acked_q16) * kScalableAiPermille / 1000);
  return grow_q16;
}

// A sender that left slow start without a loss (CUBIC's HyStart sets ssthresh to cwnd when the
// round trip grows) holds its flight at the window it had: each segment acknowledged lets one
// new segment out, where slow start lets two. The wire shows the flight coming back to its
// largest so far, again and again, without passing it. kSsFlatSends such clean sends (each new
// largest flight halves the count: slow start makes one with every ACK, a sender in congestion
// avoidance one every few ACKs), at a window of at least kSsFlatMinSegments (Linux's
// hystart_low_window: HyStart acts from 16 segments on), and the replica leaves slow start at
// the flight held: a loss then is one in congestion avoidance, as the kernel counts it (cwnd >=
// ssthresh), and a connection without loss ends with that window, not with the doubling the
// slow-start replica would have gone on with. Lab capture pcaps/lab/cubic_3nets: the kernel's
// HyStart set ssthresh 5-40 ms before two losses (10.119.1.10:48251 at 59, 10.119.2.11:40559
// at 59-60); the gateway, still in slow start, made no sample; now 58 and 58. Any count from 2
// to 8 gave these two; 2 also fired on a flight held for two sends only, 2 segments past the
// kernel's window (SACK accounting, 10.119.3.10:45613). Counted in a row (reset by a new
// largest flight), the rule missed HyStart exits at 132 segments (truth_matrix.py, path
// b100_q05), where CUBIC's growth passes the largest flight every two to four ACKs. Reno never
// triggers it (stored reno capture), a receiver-window-limited sender does (the window it
// then holds is the one it gets).
constexpr uint32_t kSsFlatSends = 4;
constexpr uint32_t kSsFlatMinSegments = 16;

}  // namespace tracker_detail

// An ACK of new data (`acked` bytes, up to `ack`) for direction d.
inline void Tracker::cwnd_on_ack(Flow& f, Dir d, uint32_t ack, uint32_t acked,
                                 uint32_t sacked_above) {
  using namespace tracker_detail;
  HalfFlow& h = f.h(d);
  const uint32_t mss = h.smss ? h.smss : kDefaultMss;
  const uint32_t acked_q16 = uint32_t(std::min<uint64_t>(uint64_t(acked) * kQ16 / mss, 1u << 24));
  switch (h.cc) {
    case CcState::kFastRecovery:
      if (seq_ge(ack, loss(h).recover)) {  // full ACK: deflate to ssthresh
        h.cc = CcState::kCongestionAvoidance;
        h.cwnd_q16 = clamp_cwnd(uint64_t(h.ssthresh_seg) * kQ16);
        // The sender's pipe at the full ACK bounds its new window from below: proportional
        // rate reduction (RFC 6937, Linux) sends during recovery so that the data in the
        // network comes down to ssthresh, and the sender holds no more than its window. The
        // pipe is what it sent past this ACK less what the receiver reports holding (SACK),
        // never more than the window before the loss. CUBIC's 0.7 shows here when the next
        // loss comes before a clean flight could (lab capture cubic_3nets, 10.119.3.10:45613:
        // W_c 4 against the kernel's 6, now 5). Only after a loss in congestion avoidance: the
        // replica's window at a loss in slow start can be far above the sender's (DESIGN.md),
        // and on the stored Scalable TCP captures the bound then ran 20-30 segments above the
        // kernel's next window (pcaps/lab/sender/spand_scalable_p1, p2). Counting all data sent
        // during recovery instead (snd_max - recover, SACKed data included) ran ahead of the
        // kernel's window (stored captures: cubic W_c within 1 from 100/107 to 91/107, reno
        // from 120 to 117).
        const uint32_t out = h.snd_max - ack;
        const uint32_t pipe = out > sacked_above ? out - sacked_above : 0;
        const uint64_t pipe_q16 =
            std::min<uint64_t>(uint64_t(pipe) * kQ16 / mss, loss(h).cwnd_before_loss_q16);
        if (loss(h).recovery_from_ca && pipe_q16 > h.cwnd_q16) h.cwnd_q16 = clamp_cwnd(pipe_q16);
        // The decrease is read on a round wholly after recovery.
        if (h.flags & kHfMdPending) start_round(h);
        // A full ACK that still SACKs data above a hole: Linux leaves recovery and enters it
        // again on this ACK, even when the hole's resend went out during the first recovery
        // (then no new resend shows it). Measured on the lab captures: loss events exact
        // 27/30 -> 29/30 (reno) and 27/30 -> 30/30 (cubic).
        if (sacked_above) start_loss_event(f, d, false);
      }
      break;
    case CcState::kTimeoutRecovery:
      // Slow start from one segment up to ssthresh and no further on one ACK (Linux's
      // tcp_slow_start), then congestion avoidance: the ACK that fills the last hole
      // acknowledges at once all the data the receiver held above it, which a sender
      // restarting from one segment never had in flight.
      if (h.cwnd_q16 < uint32_t(h.ssthresh_seg) * kQ16) {
        h.cwnd_q16 = clamp_cwnd(
            std::min<uint64_t>(uint64_t(h.cwnd_q16) + acked_q16, uint64_t(h.ssthresh_seg) * kQ16));
      } else {
        h.cwnd_q16 = clamp_cwnd(h.cwnd_q16 + ca_growth_q16(h.cwnd_q16, acked_q16));
      }
      if (seq_ge(ack, loss(h).recover)) {
        h.cc = h.cwnd_q16 >= uint32_t(h.ssthresh_seg) * kQ16 ? CcState::kCongestionAvoidance
                                                             : CcState::kSlowStart;
      }
      break;
    case CcState::kSlowStart:
      h.cwnd_q16 = clamp_cwnd(uint64_t(h.cwnd_q16) + acked_q16);
      if (h.cwnd_q16 >= uint32_t(h.ssthresh_seg) * kQ16) h.cc = CcState::kCongestionAvoidance;
      break;
    case CcState::kCongestionAvoidance:
      // Only in a round the window limited (RFC 7661; Linux grows cwnd only when
      // tcp_is_cwnd_limited): a sender held below its window by the receiver or the
      // application does not grow it. Real capture tcptrace_dsack.dmp: a client whose flight
      // sat at 83 segments for many rounds had a replica of 91 at its first loss (84 now).
      if (h.flags & kHfRoundLimited)
        h.cwnd_q16 = clamp_cwnd(h.cwnd_q16 + ca_growth_q16(h.cwnd_q16, acked_q16));
      break;
  }
  if (seq_ge(ack, h.round_end)) end_round(f, d);
}

// Restart after idle (RFC 5681 4.1): nothing in flight for longer than an RTO.
inline void Tracker::restart_after_idle(HalfFlow& h, uint32_t now_us) {
  using namespace tracker_detail;
  if (h.snd_max == h.snd_una && h.last_send_us && now_us - h.last_send_us > rto_us(h) &&
      h.cc != CcState::kTimeoutRecovery) {
    const uint32_t rw = clamp_cwnd(uint64_t(cfg_.restart_window_segments) * kQ16);
    if (h.cwnd_q16 > rw) h.cwnd_q16 = rw;
  }
}

// Flight and rounds after a segment left: the replica never holds less than what the sender had
// in flight.
inline void Tracker::bound_cwnd_by_flight(HalfFlow& h, bool below) {
  using namespace tracker_detail;
  const uint32_t flight = flight_segments(h);
  // Slow start left without a loss (kSsFlatSends): clean sends that bring the flight back to
  // its largest without passing it.
  if (h.cc == CcState::kSlowStart && !below && h.dupacks == 0 && !(h.flags & kHfSackHoles)) {
    if (flight > h.max_flight_seg) {
      h.ss_flat_sends /= 2;
    } else if (flight == h.max_flight_seg && h.ss_flat_sends != UINT8_MAX) {
      ++h.ss_flat_sends;
    }
    if (h.ss_flat_sends >= kSsFlatSends && h.max_flight_seg >= kSsFlatMinSegments) {
      h.cc = CcState::kCongestionAvoidance;
      h.ssthresh_seg = h.max_flight_seg;
      h.cwnd_q16 = clamp_cwnd(uint64_t(h.max_flight_seg) * kQ16);
    }
  }
  h.max_flight_seg = std::max<uint16_t>(h.max_flight_seg, sat16(flight));
  // The flight bounds cwnd from below only when new data goes out (the sender's window allowed
  // it), and not while the receiver holds out-of-order data (duplicate ACKs, SACK blocks):
  // limited transmit (RFC 3042) and SACK accounting let snd_max - snd_una exceed cwnd by the
  // segments the receiver already has. The same clean flights measure the decrease.
  if ((h.cc == CcState::kSlowStart || h.cc == CcState::kCongestionAvoidance) && !below &&
      h.dupacks == 0 && !(h.flags & kHfSackHoles)) {
    if (uint64_t(flight) * kQ16 > h.cwnd_q16) h.cwnd_q16 = clamp_cwnd(uint64_t(flight) * kQ16);
    h.round_flight_seg = std::max<uint16_t>(h.round_flight_seg, sat16(flight));
  }
  if (flight + 1 >= cwnd_segments(h)) h.flags |= kHfRoundLimited;
}

// A new segment of a direction that has lost before (sender identification needs two losses, so
// the first one's LossState holds the counts): sent on the ACK clock, or on a timer of its own
// (sender_id.hpp, kPacedGapFlightDivisor), counted from the last ACK of any kind (in recovery an
// ACK-clocked sender answers duplicate ACKs) and the previous segment. Not a send from idle,
// which follows the application.
inline void Tracker::note_send_clock(HalfFlow& h, uint32_t now_us) {
  if (h.loss == 0 || h.srtt_us == 0 || h.snd_max == h.snd_una) return;
  SenderReadings& r = pool_.at(h.loss).sender;
  const uint32_t last_us = std::max(h.last_send_us, r.last_ack_us);
  const bool paced =
      int32_t(now_us - last_us) > 0 &&
      uint64_t(now_us - last_us) * kPacedGapFlightDivisor * flight_segments(h) >= h.srtt_us;
  if (r.sends_clocked == UINT16_MAX || r.sends_paced == UINT16_MAX) {
    r.sends_clocked /= 2;
    r.sends_paced /= 2;
  }
  ++(paced ? r.sends_paced : r.sends_clocked);
}

}  // namespace spand
