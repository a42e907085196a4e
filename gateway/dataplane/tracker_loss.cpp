// Where losses are classified. A segment below the highest sequence sent is (1) a capture copy
// (an old IPv4 ID, or the identical segment within dup_window_us), (2) reordered (it fills a gap
// the monitor never saw data in), else (3) a retransmission: fast (duplicate ACKs or SACK),
// timeout (the RTO fired), a tail-loss probe or other. A fast or timeout resend outside recovery
// starts a loss event, counted by class and by flight size as Tstat does. Also the gaps, SACK and
// DSACK (spurious resends), and duplicate ACKs.
#include "dataplane/tracker_loss.hpp"

#include "dataplane/tracker_cwnd.hpp"  // kLossBetaPermille

namespace spand {

using namespace tracker_detail;

namespace {

int find_hole(const LossState* l, uint32_t seq) {
  if (!l) return -1;
  for (int i = 0; i < LossState::kHoles; ++i) {
    if (seq_ge(seq, l->hole_lo[i]) && seq_lt(seq, l->hole_hi[i])) return i;
  }
  return -1;
}

// Remembers a gap of sender h; with no free slot the lowest (oldest) gap gives way.
void add_hole(HalfFlow& h, LossState& l, uint32_t lo, uint32_t hi) {
  h.gaps_open = 1;
  int slot = 0;
  for (int i = 0; i < LossState::kHoles; ++i) {
    if (l.hole_lo[i] == l.hole_hi[i]) {
      slot = i;
      break;
    }
    if (seq_lt(l.hole_lo[i], l.hole_lo[slot])) slot = i;
  }
  l.hole_lo[slot] = lo;
  l.hole_hi[slot] = hi;
}

}  // namespace

// A copy made by the capture: an old IPv4 ID (see note_ip_id in tracker.cpp), or, without usable
// IDs, the very same segment again within microseconds. Data that fills a gap is never a copy.
bool Tracker::is_capture_copy(HalfFlow& h, const Segment& s, uint16_t sig, bool ipid_ok,
                              bool old_ip_id, uint32_t now_us) {
  if (s.len == 0 && s.end == s.pend) return false;  // neither data nor FIN
  const bool same_again = !ipid_ok && s.seq == h.last_seq && sig == h.last_sig &&
                          now_us - h.last_data_us <= cfg_.dup_window_us;
  return (old_ip_id || same_again) && find_hole(loss_if_any(h), s.seq) < 0;
}

// Bytes the monitor never saw, from snd_max up to seq: a gap. More than twice the window (at
// least twice the restart window) at once is not upstream loss but a sequence jump (a forged
// segment megabytes on): the flight no longer consists of segments the monitor saw, so no W_c
// from here on.
void Tracker::note_gap(Flow& f, Dir d, uint32_t seq) {
  HalfFlow& h = f.h(d);
  const uint64_t gap_seg = (seq - h.snd_max) / (h.smss ? h.smss : kDefaultMss);
  const uint64_t allowed = 2 * std::max<uint64_t>(cwnd_segments(h), cfg_.restart_window_segments);
  if (gap_seg > allowed && (h.flags & kHfSeqKnown)) {
    if (!h.seq_jump) ++emit_.counters->seq_jumps;
    h.seq_jump = 1;
  }
  add_hole(h, loss(h), h.snd_max, seq);
}

// A segment that starts below snd_max and is no capture copy.
void Tracker::on_old_data(Flow& f, Dir d, const Segment& s, uint32_t now_us) {
  HalfFlow& h = f.h(d);
  const uint32_t seq = s.seq, len = s.len, pend = s.pend, end = s.end;
  if (!(h.flags & kHfSynSeen) && seq_lt(seq, h.isn)) {
    // Picked up mid-stream: bytes below the lowest seen so far are a first sighting too.
    LossState& l = loss(h);
    bump(l.reordered);
    l.repeat_bytes += len - ((seq_lt(pend, h.isn) ? pend : h.isn) - seq);
    if (seq_lt(end, h.isn)) add_hole(h, l, end, h.isn);
    h.isn = seq;
  } else if (const int i = find_hole(loss_if_any(h), seq); i >= 0) {
    // Fills a gap: first sight of these bytes at the monitor (reordering, or upstream loss).
    LossState& l = loss(h);  // the one holding the gap
    bump(l.reordered);
    const uint32_t lo = l.hole_lo[i], hi = l.hole_hi[i];
    const uint32_t first_seen = seq_gt(pend, seq) ? (seq_lt(pend, hi) ? pend : hi) - seq : 0;
    l.repeat_bytes += len - first_seen;
    if (seq == lo) {
      l.hole_lo[i] = seq_lt(end, hi) ? end : hi;
    } else {
      l.hole_hi[i] = seq;
      if (seq_lt(end, hi)) add_hole(h, l, end, hi);  // the part above the segment, if room
    }
  } else {
    // A retransmission.
    LossState& l = loss(h);
    karn_on_resend(h, seq);
    uint32_t first_seen = 0;  // a resend may carry new bytes past snd_max
    if (seq_gt(end, h.snd_max)) {
      if (seq_gt(pend, h.snd_max)) first_seen = pend - h.snd_max;
      h.snd_max = end;
    }
    l.repeat_bytes += len - first_seen;
    classify_resend(f, d, l, seq, end, now_us);
  }
}

// Which kind of retransmission, from the replica's state, the duplicate ACKs and SACK blocks
// seen, and the time since the sender's last transmission against its RTO.
void Tracker::classify_resend(Flow& f, Dir d, LossState& l, uint32_t seq, uint32_t end,
                              uint32_t now_us) {
  HalfFlow& h = f.h(d);
  const uint32_t idle_us = now_us - h.last_send_us;
  const uint32_t rto = rto_us(h);
  // Both sides offered SACK (the sender uses it), and a tail-loss probe of the only segment out
  // is still unacknowledged (below: a second resend of it is the RTO).
  const bool sack_agreed =
      (h.flags & kHfSackPermitted) && (f.h(opposite(d)).flags & kHfSackPermitted);
  const bool probe_out =
      l.probe_end != 0 && seq_gt(l.probe_end, h.snd_una) && seq_le(l.probe_end, h.snd_max);
  if (h.cc == CcState::kFastRecovery) {
    // Recovery failed: the retransmission timer, restarted by every ACK of new data, fired. Or
    // the sender resent its first unacknowledged segment after a silence no ACK broke since its
    // last transmission, of at least max(200 ms, 2 srtt): in recovery only a timer sends
    // without an ACK, and the other one (RACK's reordering timer, armed on an ACK) fires within
    // about 1.25 srtt of that ACK, under this bound. The RTO estimate alone can miss by the
    // estimate's error: lab truth_matrix.py, path b5_q2, scalable 10.181.2.11:35959, the
    // kernel's RTO 243.967 ms after the last ACK of new data, the gateway's estimate 244.179 ms
    // (its srtt 44 ms against the kernel's 34 ms): the timeout event was missed.
    const bool ack_silence = int32_t(h.last_send_us - l.sender.last_ack_us) > 0 &&
                             idle_us >= std::max(cfg_.min_rto_us, 2 * h.srtt_us);
    if (seq == h.snd_una && (now_us - h.last_progress_us >= rto || ack_silence)) {
      start_loss_event(f, d, true, idle_us);
      l.rto_resent_end = end;
      bump(l.rexmt_timeout);
    } else {
      bump(l.rexmt_fast);  // NewReno partial ACK or SACK-driven resend within the same event
    }
  } else if (h.cc == CcState::kTimeoutRecovery) {
    // Go-back-N after an RTO, the RTO backing off, or the holes the receiver's SACK blocks
    // report: all one timeout event until everything sent before the RTO is acknowledged. A
    // sender starts no fast recovery below its recovery point after a timeout (RFC 6582 3.2;
    // Linux stays in its Loss state until then). Lab, truth_matrix.py path b5_q2 (BDP 5
    // segments, 2 BDP buffer), reno: about 30 SACK-driven resends 20-28 ms after an RTO were
    // counted as fast events the kernel never had; connections with the kernel's loss events 18/30
    // -> 24/30 with this and the half-RTT bound on the rule below (five of the six left are
    // recoveries that resent nothing, tests/lab/compare_truth.py).
    if (seq == h.snd_una && idle_us >= rto) {
      // The timer again, backing off: the sender sent nothing for an RTO. Each expiry starts
      // the Loss state anew in Linux (tcp_enter_loss: high_seq = snd_nxt, cwnd = 1), so the
      // data sent since the first RTO is below the new recovery point: SACK-driven resends of
      // it stay in this timeout event. Lab truth_matrix.py, path b5_q2 (the kernel's trace:
      // Loss, then Loss again on each backoff, then Recovery from Loss without passing Open):
      // reno 10.57.3.10:51317, cubic without HyStart 10.133.1.10:32851 and 10.133.2.11:57897,
      // each a fast event the kernel never had once the ACKs passed the first RTO's point.
      l.recover = h.snd_max;
      l.rto_resent_end = end;
      h.cwnd_q16 = kQ16;
      bump(l.rexmt_timeout);
      return;
    }
    if ((h.flags & kHfSackPermitted) && (h.flags & kHfSackHoles) && idle_us < rto &&
        seq_lt(seq, l.rto_resent_end)) {
      // A retransmission lost again, resent on SACK information, not on the timer: Linux (RACK)
      // leaves its Loss state for fast recovery and cuts its window a second time, within the
      // same timeout event. Lab, truth_matrix.py paths b5_q2 and b5_q1_qa (windows of 2-5
      // segments): scalable 10.125.3.10:44547, ssthresh 5 -> 2 on such a resend; the replica,
      // still slow-starting to 5, made W_c 4 at the next loss against the kernel's 2.
      h.ssthresh_seg = sat16(
          std::max<uint32_t>(uint32_t(uint64_t(h.cwnd_q16) * kLossBetaPermille / 1000 / kQ16), 2));
      h.cc = CcState::kFastRecovery;
      l.recover = h.snd_max;
      l.recovery_from_ca = 0;
    }
    if (seq_gt(end, l.rto_resent_end)) l.rto_resent_end = end;
    bump(l.rexmt_timeout);
  } else if (h.dupacks >= 3 || ((h.dupacks >= 1 || (h.flags & kHfSackHoles)) &&
                                (h.flags & kHfSackPermitted) && idle_us < rto)) {
    // Dupack threshold, or SACK-based detection (RFC 6675, RACK in RFC 8985): the receiver
    // reports data above a hole and the resend comes before the retransmission timer.
    start_loss_event(f, d, false);
    bump(l.rexmt_fast);
  } else if (seq == h.snd_una && (h.flags & kHfSackPermitted) && idle_us < rto &&
             now_us - h.last_progress_us < std::min(cfg_.min_rto_us, h.srtt_us / 2)) {
    // The first unacknowledged segment again, right after an ACK of new data: Linux re-entering
    // fast recovery on the ACK that ended the last one, from its own SACK scoreboard (RACK),
    // though this ACK reports no hole (without SACK, the duplicate-ACK rules above decide). Stored
    // reno lab capture, 10.170.2.11:44579: a resend 11 us after such an ACK, the kernel's trace
    // shows Recovery, Open, Recovery on that ACK; it was counted a timeout. Within half a round
    // trip only (RACK's reordering window is a quarter of the minimum RTT): the ACK does not
    // always restart the retransmission timer. After a tail-loss probe Linux arms it from the
    // first unacknowledged segment's own send time (tcp_rearm_rto), so it can fire well under
    // min_rto_us after the last ACK: lab truth_matrix.py, path b5_q2 (RTT 10-30 ms), 28 of the
    // kernel's RTOs came 150-190 ms after an ACK of new data and were counted fast. Before the
    // tail-loss probe's rule: a probe leaves on a timer of at least 2 srtt, never right after
    // an ACK, while the segment Linux resends on re-entering recovery may be the last one sent
    // (truth_matrix.py, b5_q1_qa: 10.45.3.10:34201, a resend 16 us after the ACK was counted a
    // probe and the kernel's recovery missed).
    start_loss_event(f, d, false);
    bump(l.rexmt_fast);
  } else if (end == h.snd_max && h.dupacks == 0 && (seq != h.snd_una || idle_us < rto)) {
    // Tail-loss probe (RFC 8985): the highest segment resent before the RTO, to provoke
    // SACKs. Not a loss event by itself; a loss it reveals starts fast recovery.
    bump(l.rexmt_other);
  } else if (end == h.snd_max && seq == h.snd_una && h.dupacks == 0 && !(h.flags & kHfSackHoles) &&
             sack_agreed && !probe_out) {
    // The only segment out, resent when the RTO was due, no probe of it before, SACK agreed by
    // both sides: a tail-loss probe too. Linux (SACK in use, no recovery under way) arms its
    // probe timer for the earlier of the probe timeout (2 srtt, plus 200 ms with one segment
    // out) and the RTO (tcp_schedule_loss_probe), so with one segment out the probe always
    // leaves first, and exactly when an RTO would: the segment, its timing and its ACK are an
    // RTO's. Only the flight after the ACK could tell, and only one way: more than two
    // segments is no restart from one segment; two or fewer, or nothing (the transfer's last
    // segment), fits both. A second resend of it before its ACK is the RTO (below). Lab
    // truth_matrix.py, the last segment of a transfer on paths b5_q2 and b35_q025 (cubic
    // 10.133.3.11:56129, 10.122.3.10:37215) and b35_q1_qa (cubic 10.145.3.11:34399): the
    // kernel's trace shows no Loss state, only CWR on the ACK after (the probe's loss
    // recovery); each was a timeout event of ours.
    l.probe_end = end;
    bump(l.rexmt_other);
  } else if (idle_us >= rto || seq == h.snd_una) {
    start_loss_event(f, d, true, idle_us);
    l.rto_resent_end = end;
    bump(l.rexmt_timeout);
  } else {
    bump(l.rexmt_other);
  }
}

void Tracker::start_loss_event(Flow& f, Dir d, bool timeout, uint32_t wait_us) {
  HalfFlow& h = f.h(d);
  LossState& l = loss(h);
  // Before the W_c sample, which names the sender from the losses so far: this loss counted,
  // the decrease of the one before read (on the part of its round seen, if it was cut short).
  read_cut_short_decrease(h, l);
  bump(timeout ? l.loss_timeout : l.loss_fast);
  wc_at_loss(f, d);
  h.flags |= kHfLossSeen;
  ++emit_.counters->loss_events[size_t(d)][timeout ? 1 : 0];
  bump(l.loss_by_flight[timeout ? 1 : 0][loss_flight_class(flight_segments(h))]);
  if (timeout) l.timeout_wait_us += wait_us;
  cwnd_on_loss(h, l, timeout);
}

}  // namespace spand
