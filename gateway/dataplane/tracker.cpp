#include "dataplane/tracker.hpp"

#include <algorithm>

#include "dataplane/flow_table.hpp"
#include "dataplane/worker.hpp"

namespace spand {

namespace {

constexpr uint32_t kRelMaxUs = 0xF000'0000u;  // rebase relative times before they can overflow
constexpr uint32_t kInitialRtoUs = 1'000'000;
// A connection picked up mid-stream gives W_c samples only once a flight of this many segments
// was seen (one data segment and an ACK make a "connection" at will).
constexpr uint16_t kMinPickupFlightSegments = 3;
constexpr uint32_t kQ16 = 65536;  // cwnd fixed point: 1/65536 segment

inline void bump(uint16_t& c) {
  if (c != UINT16_MAX) ++c;
}

constexpr uint64_t kCwndMaxQ16 = 0xFFFF'0000ull;  // 65535 segments

inline uint32_t clamp_cwnd(uint64_t q16) {
  return uint32_t(q16 > kCwndMaxQ16 ? kCwndMaxQ16 : q16);
}

inline uint16_t sat16(uint32_t v) {
  return v > UINT16_MAX ? UINT16_MAX : uint16_t(v);
}

inline uint16_t fold_sig(const ParsedPacket& p) {
  const uint32_t x = p.ack ^ (p.payload_len << 16) ^ p.window ^ p.flags;
  return uint16_t(x ^ (x >> 16));
}

// The sender's segment size: the receiver's MSS option caps it (minus the timestamp option when
// in use); below that, the largest segment seen. GRO/TSO super-segments exceed the cap and are
// counted as several segments.
inline uint32_t mss_cap(const HalfFlow& sender, const HalfFlow& receiver) {
  if (receiver.mss_opt == 0) return 0;
  const uint32_t opt = (sender.flags & kHfTimestamps) ? 12 : 0;
  return receiver.mss_opt > opt ? receiver.mss_opt - opt : receiver.mss_opt;
}

// The replica is a lower bound that the sender's own flights pull up (see on_data): it decreases
// by Reno's 1/2 at a loss and grows by half a segment per window of ACKs, the slowest a common
// sender goes (CUBIC's Reno-friendly rate at small windows is about 0.53). Any sender that grows
// faster or cuts less (CUBIC 0.7, Scalable TCP 7/8) shows it in the next clean flight, while a
// replica that ran ahead of a slower sender would never come back down. Measured against the
// kernel's cwnd in the lab (tests/lab), this beat following the measured decrease.
constexpr uint32_t kLossBetaPermille = 500;
constexpr uint32_t kGrowthAlphaPermille = 500;

int find_hole(const LossState* l, uint32_t seq) {
  if (!l) return -1;
  for (int i = 0; i < LossState::kHoles; ++i) {
    if (seq_ge(seq, l->hole_lo[i]) && seq_lt(seq, l->hole_hi[i])) return i;
  }
  return -1;
}

// Remembers a gap; with no free slot the lowest (oldest) gap gives way.
void add_hole(LossState& l, uint32_t lo, uint32_t hi) {
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

bool addr_in(const Prefix& pfx, const IpAddr& a) {
  return prefix_with_len(a, pfx.len) == pfx;
}

}  // namespace

void Emitter::sample(const Sample& s) {
  if (!samples->push(s)) {
    ++counters->ring_full_samples;
    return;
  }
  if (s.kind == SampleKind::kWc) ++counters->samples_wc;
  if (s.kind == SampleKind::kRtt) ++counters->samples_rtt;
  if (s.kind == SampleKind::kDecrease) ++counters->samples_decrease;
}

void Emitter::record(const FlowRecord& r) {
  if (!flows->push(r)) ++counters->ring_full_flows;
}

LossState& Tracker::loss(HalfFlow& h) {
  if (h.loss == 0) {
    h.loss = pool_.take();
    if (h.loss == 0) {
      ++emit_.counters->loss_states_exhausted;
      return spill_;
    }
    count_loss_states();
  }
  return pool_.at(h.loss);
}

void Tracker::count_loss_states() {
  emit_.counters->loss_states = pool_.in_use();
  emit_.counters->loss_states_peak = pool_.peak_in_use();
}

uint64_t Tracker::unique_bytes(HalfFlow& h) {
  const LossState* l = loss_if_any(h);
  return h.bytes - (l ? l->repeat_bytes : 0);
}

LossState* Tracker::loss_if_any(HalfFlow& h) {
  return h.loss ? &pool_.at(h.loss) : nullptr;
}

bool Tracker::is_new_incarnation(const Flow& f, const ParsedPacket& p, bool src_is_lo) {
  if ((p.flags & (kSyn | kAck)) != kSyn) return false;
  const Dir d = (src_is_lo == bool(f.client_is_lo)) ? Dir::kC2S : Dir::kS2C;
  const HalfFlow& h = f.half[int(d)];
  if (f.phase == FlowPhase::kClosing) return true;
  // A SYN on a flow nothing verified (lone ACKs, e.g. spoofed ones that hit this 4-tuple first):
  // the connection starts here.
  if (!f.verified && !f.handshake) return true;
  // A SYN with a different initial sequence number from a side that already sent data.
  return (h.flags & kHfSeqKnown) && p.seq != h.isn;
}

void Tracker::on_new_flow(Flow& f, const ParsedPacket& p, bool src_is_lo) {
  f.base_ns = p.ts_ns;
  f.last_ns = p.ts_ns;
  f.vlan = p.vlan_outer;
  f.ip_v6 = p.ip_version == 6;
  bool src_is_client;
  if (p.flags & kSyn) {
    src_is_client = !(p.flags & kAck);  // SYN: client; SYN-ACK: server
    f.handshake = 1;
  } else {
    src_is_client = true;
    bool decided = false;
    for (int i = 0; i < cfg_.inside_count; ++i) {
      if (addr_in(cfg_.inside[i], p.src)) {
        src_is_client = false;
        decided = true;
        break;
      }
      if (addr_in(cfg_.inside[i], p.dst)) {
        decided = true;
        break;
      }
    }
    // Picked up mid-stream with no configured networks: the lower port is the service.
    if (!decided) src_is_client = p.sport > p.dport;
  }
  f.client_is_lo = (src_is_client == src_is_lo);
  f.phase = (p.flags & kSyn) ? FlowPhase::kSynOnly : FlowPhase::kEstablished;
  if (f.handshake && src_is_client) {
    Sample s = base_sample(f, SampleKind::kNewConnection);
    s.ts_ns = p.ts_ns;
    emit_.sample(s);
  }
}

void Tracker::rebase(Flow& f, uint64_t now_ns) {
  // Keep the last ~4.5 minutes representable; older relative times clamp to 0.
  const uint64_t shift_us = (now_ns - f.base_ns) / 1000 - 0x1000'0000u;
  auto fix = [shift_us](uint32_t& t) { t = t > shift_us ? uint32_t(t - shift_us) : 0; };
  for (HalfFlow& h : f.half) {
    fix(h.syn_us);
    fix(h.timed_us);
    fix(h.ts_us);
    fix(h.last_send_us);
    fix(h.last_progress_us);
    fix(h.first_data_us);
    fix(h.last_data_us);
  }
  f.base_ns += shift_us * 1000;
}

void Tracker::on_packet(Flow& f, const ParsedPacket& p, bool src_is_lo) {
  if (p.ts_ns > f.last_ns) f.last_ns = p.ts_ns;
  // Capture time can step back (merged traces); treat such a packet as arriving "now".
  const uint64_t t_ns = p.ts_ns > f.base_ns ? p.ts_ns : f.base_ns;
  if ((t_ns - f.base_ns) / 1000 >= kRelMaxUs) rebase(f, t_ns);
  const uint32_t now_us = uint32_t((std::max(t_ns, f.base_ns) - f.base_ns) / 1000);

  const Dir d = (src_is_lo == bool(f.client_is_lo)) ? Dir::kC2S : Dir::kS2C;
  HalfFlow& snd = f.h(d);
  ++snd.packets;
  if (!f.verified) {
    const HalfFlow& other = f.h(opposite(d));
    if (f.handshake_done ||
        (other.packets && (p.payload_len || snd.data_packets || other.data_packets)))
      f.verified = 1;
  }
  if (p.vlan_outer && !f.vlan) f.vlan = p.vlan_outer;

  // IPv4 IDs: a datagram not newer than the newest this sender emitted is a copy made by the
  // capture (a resend gets a fresh ID), not a second transmission.
  const bool ipid_ok = p.ip_version == 4 && p.ip_id != 0;
  const bool old_ip_id =
      ipid_ok && (snd.flags & kHfIpIdKnown) && int16_t(p.ip_id - snd.max_ip_id) <= 0;
  if (ipid_ok && !old_ip_id) {
    snd.max_ip_id = p.ip_id;
    snd.flags |= kHfIpIdKnown;
  }

  const bool synack = (p.flags & (kSyn | kAck)) == (kSyn | kAck);
  const bool resent_syn = synack ? (snd.flags & kHfSynAckSent) != 0
                                 : (snd.flags & (kHfSynSeen | kHfSynAckSent)) == kHfSynSeen;
  if ((p.flags & kSyn) && resent_syn && p.seq == snd.isn) {
    LossState& l = loss(snd);
    if (old_ip_id) {
      bump(l.capture_dups);
      return;
    }
    // A resent SYN or SYN-ACK: only the SYN timer sends these. Karn: the SYN-ACK-to-ACK leg
    // becomes ambiguous; the SYN-to-SYN-ACK leg restarts from the newest SYN below.
    bump(l.rexmt_timeout);
    bump(l.loss_timeout);
    bump(l.loss_by_flight[1][0]);  // the SYN was the whole flight
    // The SYN timer ran from the previous SYN (a SYN-ACK: from the previous SYN-ACK).
    HalfFlow& timer = synack ? f.h(Dir::kS2C) : snd;
    l.timeout_wait_us += now_us - timer.syn_us;
    if (synack) timer.syn_us = now_us;
    if (p.flags & kAck) f.synack_resent = 1;
  }
  if (p.flags & kSyn) {
    if (p.opt.mss) snd.mss_opt = p.opt.mss;
    if (p.opt.wscale != 0xff) snd.wscale = p.opt.wscale;
    if (p.opt.sack_permitted) snd.flags |= kHfSackPermitted;
    if (p.opt.has_ts) snd.flags |= kHfTimestamps;
    if (!(snd.flags & kHfSeqKnown) || !seq_gt(snd.snd_max, p.seq + 1)) {
      snd.snd_max = p.seq + 1;
      snd.round_end = snd.snd_max;
    }
    snd.flags |= kHfSynSeen | kHfSeqKnown | (synack ? kHfSynAckSent : 0);
    snd.isn = p.seq;
    if (!(p.flags & kAck)) {
      if (d == Dir::kC2S) snd.syn_us = now_us;  // Karn: a resent SYN restarts the handshake timer
    } else if (!f.synack_seen) {
      f.synack_seen = 1;
      f.h(Dir::kS2C).syn_us = now_us;  // whichever side sent it (simultaneous open)
      const HalfFlow& client = f.h(Dir::kC2S);
      if (client.flags & kHfSynSeen) f.syn_synack_us = int32_t(now_us - client.syn_us);
    }
  }
  if (p.flags & kRst) {
    // A refused connection: the RST-ACK answers the SYN, one leg of the handshake RTT.
    if (d == Dir::kS2C && (p.flags & kAck) && !f.synack_seen && f.syn_synack_us < 0 &&
        (f.h(Dir::kC2S).flags & kHfSynSeen) && p.ack == f.h(Dir::kC2S).isn + 1) {
      f.syn_synack_us = int32_t(now_us - f.h(Dir::kC2S).syn_us);
    }
    f.close_kind = uint8_t(CloseReason::kRst);
    f.phase = FlowPhase::kClosing;
  }

  // Handshake completes: the client's first ACK of the SYN-ACK.
  if (d == Dir::kC2S && (p.flags & (kAck | kSyn)) == kAck && f.synack_seen && !f.handshake_done &&
      p.ack == f.h(Dir::kS2C).isn + 1) {
    f.handshake_done = 1;
    if (!f.synack_resent) f.synack_ack_us = int32_t(now_us - f.h(Dir::kS2C).syn_us);
    if (f.phase == FlowPhase::kSynOnly) f.phase = FlowPhase::kEstablished;
    // Legs of up to 35 minutes each fit int32; their sum is taken in 64 bits (it overflowed).
    const int64_t hs = int64_t(f.syn_synack_us) + f.synack_ack_us;
    if (f.syn_synack_us >= 0 && f.synack_ack_us >= 0 && hs <= INT32_MAX) {
      rtt_sample(f, Dir::kS2C, uint32_t(hs), RttSource::kHandshake);
    }
  }

  if (p.flags & kAck) on_ack(f, opposite(d), p, now_us);
  if (p.opt.has_ts && (p.flags & kAck)) on_timestamp_echo(f, opposite(d), p.opt.tsecr, now_us);
  if (p.payload_len > 0 || (p.flags & kFin)) on_data(f, d, p, now_us, old_ip_id);

  if (p.flags & kFin) {
    snd.flags |= kHfFinSeen;
    if (f.close_kind != uint8_t(CloseReason::kRst)) f.close_kind = uint8_t(CloseReason::kFin);
    if ((f.half[0].flags & kHfFinSeen) && (f.half[1].flags & kHfFinSeen)) {
      f.phase = FlowPhase::kClosing;
    }
  }
}

uint32_t Tracker::rto_us(const HalfFlow& h) const {
  if (h.srtt_us == 0) return kInitialRtoUs;  // RFC 6298 2.1: no sample yet
  // RFC 6298 2.3 with Linux's floor, which applies to the variance term: srtt + max(4 rttvar,
  // 200 ms). A tail-loss probe (2 srtt) then comes before it, as in the kernel.
  return h.srtt_us + std::max(cfg_.min_rto_us, 4 * h.rttvar_us);
}

uint32_t Tracker::flight_segments(const HalfFlow& h) const {
  const uint32_t flight = h.snd_max - h.snd_una;
  const uint32_t mss = h.smss ? h.smss : 1460;
  return (flight + mss - 1) / mss;
}

void Tracker::on_data(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id) {
  HalfFlow& h = f.h(d);
  const HalfFlow& peer = f.h(opposite(d));
  uint32_t seq = p.seq;
  if (p.flags & kSyn) ++seq;  // data on a SYN starts after it
  const uint32_t len = p.payload_len;
  const uint32_t pend = seq + len;                         // end of the payload
  const uint32_t end = pend + ((p.flags & kFin) ? 1 : 0);  // end in sequence space (FIN counts)

  if (!(h.flags & kHfSeqKnown)) {  // picked up mid-stream
    h.flags |= kHfSeqKnown;
    h.isn = seq;
    h.snd_max = seq;
    h.round_end = seq;
  }
  if (!(h.flags & kHfAckKnown)) {
    h.snd_una = h.snd_max;
    h.flags |= kHfAckKnown;
  }

  // Segment size, and how many segments this one counts for (GRO/TSO super-segments).
  const uint32_t cap = mss_cap(h, peer);
  if (len > h.smss && (cap == 0 || len <= cap)) h.smss = uint16_t(std::min<uint32_t>(len, 65535));
  if (h.smss == 0 && cap) h.smss = uint16_t(cap);

  const bool below = seq_lt(seq, h.snd_max);
  const bool ipid_ok = p.ip_version == 4 && p.ip_id != 0;
  const uint16_t sig = fold_sig(p);

  if (below && (len > 0 || (p.flags & kFin))) {
    // A copy made by the capture: an old IPv4 ID (see on_packet), or, without usable IDs, the
    // very same segment again within microseconds.
    const bool old_id = old_ip_id;
    const bool same_again = !ipid_ok && seq == h.last_seq && sig == h.last_sig &&
                            now_us - h.last_data_us <= cfg_.dup_window_us;
    if ((old_id || same_again) && find_hole(loss_if_any(h), seq) < 0) {
      bump(loss(h).capture_dups);
      return;  // the sender sent it once: nothing else changes
    }
  }
  h.bytes += len;
  if (len > 0) {
    if (++h.data_packets == 1) h.first_data_us = now_us;
    h.last_data_us = now_us;
  }
  h.last_seq = seq;
  h.last_sig = sig;

  // The retransmission timer starts when data leaves with nothing outstanding (RFC 6298 5.1).
  if (h.snd_max == h.snd_una) h.last_progress_us = now_us;

  // Restart after idle (RFC 5681 4.1): nothing in flight for longer than an RTO.
  if (h.snd_max == h.snd_una && h.last_send_us && now_us - h.last_send_us > rto_us(h) &&
      h.cc != CcState::kTimeoutRecovery) {
    const uint32_t rw = clamp_cwnd(uint64_t(cfg_.restart_window_segments) * kQ16);
    if (h.cwnd_q16 > rw) h.cwnd_q16 = rw;
  }

  if (!below) {
    if (seq_gt(seq, h.snd_max)) {
      // Bytes the monitor never saw. More than twice the window (at least twice the restart
      // window) at once is not upstream loss but a sequence jump (a forged segment megabytes on):
      // the flight no longer consists of segments the monitor saw, so no W_c from here on.
      const uint64_t gap_seg = (seq - h.snd_max) / (h.smss ? h.smss : 1460u);
      const uint64_t allowed =
          2 * std::max<uint64_t>(cwnd_segments(h), cfg_.restart_window_segments);
      if (gap_seg > allowed && (h.flags & kHfSeqKnown)) {
        if (!h.seq_jump) ++emit_.counters->seq_jumps;
        h.seq_jump = 1;
      }
      add_hole(loss(h), h.snd_max, seq);
    }
    h.snd_max = end;
    if (!(h.flags & kHfTimedValid) && len > 0) {
      h.timed_end = end;
      h.timed_us = now_us;
      h.flags |= kHfTimedValid;
    }
    if (p.opt.has_ts && !(h.flags & kHfTsPending) && len > 0) {
      h.ts_val = p.opt.tsval;
      h.ts_us = now_us;
      h.flags |= kHfTsPending;
    }
  } else if (!(h.flags & kHfSynSeen) && seq_lt(seq, h.isn)) {
    // Picked up mid-stream: bytes below the lowest seen so far are a first sighting too.
    LossState& l = loss(h);
    bump(l.reordered);
    l.repeat_bytes += len - ((seq_lt(pend, h.isn) ? pend : h.isn) - seq);
    if (seq_lt(end, h.isn)) add_hole(l, end, h.isn);
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
      if (seq_lt(end, hi)) add_hole(l, end, hi);  // the part above the segment, if room
    }
  } else {
    // A retransmission. Karn: the timed segment's sample is now ambiguous.
    LossState& l = loss(h);
    if ((h.flags & kHfTimedValid) && seq_lt(seq, h.timed_end)) h.flags &= ~kHfTimedValid;
    uint32_t first_seen = 0;  // a resend may carry new bytes past snd_max
    if (seq_gt(end, h.snd_max)) {
      if (seq_gt(pend, h.snd_max)) first_seen = pend - h.snd_max;
      h.snd_max = end;
    }
    l.repeat_bytes += len - first_seen;
    const uint32_t idle_us = now_us - h.last_send_us;
    const uint32_t rto = rto_us(h);
    if (h.cc == CcState::kFastRecovery) {
      // Recovery failed: the retransmission timer, restarted by every ACK of new data, fired.
      if (now_us - h.last_progress_us >= rto && seq == h.snd_una) {
        start_loss_event(f, d, true, idle_us);
        bump(l.rexmt_timeout);
      } else {
        bump(l.rexmt_fast);  // NewReno partial ACK or SACK-driven resend within the same event
      }
    } else if (h.dupacks >= 3 || ((h.dupacks >= 1 || (h.flags & kHfSackHoles)) &&
                                  (h.flags & kHfSackPermitted) && idle_us < rto)) {
      // Dupack threshold, or SACK-based detection (RFC 6675, RACK in RFC 8985): the receiver
      // reports data above a hole and the resend comes before the retransmission timer.
      start_loss_event(f, d, false);
      bump(l.rexmt_fast);
    } else if (h.cc == CcState::kTimeoutRecovery) {
      bump(l.rexmt_timeout);  // go-back-N after an RTO, or the RTO backing off
    } else if (end == h.snd_max && h.dupacks == 0 && (seq != h.snd_una || idle_us < rto)) {
      // Tail-loss probe (RFC 8985): the highest segment resent before the RTO, to provoke
      // SACKs. Not a loss event by itself; a loss it reveals starts fast recovery.
      bump(l.rexmt_other);
    } else if (idle_us >= rto || seq == h.snd_una) {
      start_loss_event(f, d, true, idle_us);
      bump(l.rexmt_timeout);
    } else {
      bump(l.rexmt_other);
    }
  }
  h.last_send_us = now_us;

  // Flight and rounds: the replica never holds less than what the sender had in flight.
  const uint32_t flight = flight_segments(h);
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

void Tracker::start_loss_event(Flow& f, Dir d, bool timeout, uint32_t wait_us) {
  HalfFlow& h = f.h(d);
  const uint32_t cwnd_seg = cwnd_segments(h);
  if (h.cc == CcState::kCongestionAvoidance) {
    // W_c (DESIGN.md): cwnd at the loss minus one segment.
    wc_sample(f, d, cwnd_seg > 1 ? cwnd_seg - 1 : 1, WcReason::kLossInCongestionAvoidance,
              (h.flags & kHfRoundLimited) != 0);
  }
  LossState& l = loss(h);
  h.flags |= kHfLossSeen;
  bump(timeout ? l.loss_timeout : l.loss_fast);
  bump(l.loss_by_flight[timeout ? 1 : 0][loss_flight_class(flight_segments(h))]);
  if (timeout) l.timeout_wait_us += wait_us;
  if (h.cc != CcState::kFastRecovery && h.cc != CcState::kTimeoutRecovery) {
    l.cwnd_before_loss_q16 = h.cwnd_q16;
    h.flags |= kHfMdPending;
  }
  // ssthresh = beta x cwnd (see kLossBetaPermille).
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
      const uint64_t md = uint64_t(h.round_flight_seg) * kQ16 * 1000 / l.cwnd_before_loss_q16;
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
  start_round(h);
}

void Tracker::start_round(HalfFlow& h) {
  h.round_end = h.snd_max;
  h.round_flight_seg = 0;
  h.flags &= ~kHfRoundLimited;
}

void Tracker::on_ack(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us) {
  HalfFlow& h = f.h(d);  // the data sender whose bytes this ACK covers
  const uint32_t ack = p.ack;
  if (!(h.flags & kHfSeqKnown)) return;  // nothing seen from that sender yet
  if (!(h.flags & kHfAckKnown)) {
    h.snd_una = ack;
    h.flags |= kHfAckKnown;
    return;
  }
  // The receiver holds data above a hole.
  const bool sacks_above =
      p.opt.sack_count > 0 && seq_gt(p.opt.sack[p.opt.sack_count - 1].right, ack);
  if (p.opt.sack_count == 0) {
    h.flags &= ~kHfSackHoles;
  } else if (sacks_above) {
    h.flags |= kHfSackHoles;
  }
  // DSACK (RFC 2883): a first SACK block below the cumulative ACK, or inside the second block,
  // reports data received twice: the matching resend was spurious.
  if (p.opt.sack_count > 0) {
    const SackBlock& b0 = p.opt.sack[0];
    const bool dsack =
        seq_le(b0.right, ack) || (p.opt.sack_count > 1 && seq_ge(b0.left, p.opt.sack[1].left) &&
                                  seq_le(b0.right, p.opt.sack[1].right));
    if (dsack) {
      LossState& l = loss(h);
      const uint32_t resent = uint32_t(l.rexmt_fast) + l.rexmt_timeout + l.rexmt_other;
      bump(l.dsacks);
      if (l.rexmt_spurious < resent) bump(l.rexmt_spurious);
    }
  }
  if (seq_gt(ack, h.snd_max)) return;  // acks bytes the monitor never saw sent: ignore

  if (seq_gt(ack, h.snd_una)) {
    const uint32_t acked = ack - h.snd_una;
    h.snd_una = ack;
    h.last_progress_us = now_us;
    h.dupacks = 0;
    if ((h.flags & kHfTimedValid) && seq_ge(ack, h.timed_end)) {
      h.flags &= ~kHfTimedValid;
      rtt_between(f, d, h.timed_us, now_us, RttSource::kDataToAck);
    }
    const uint32_t mss = h.smss ? h.smss : 1460;
    const uint32_t acked_q16 = uint32_t(std::min<uint64_t>(uint64_t(acked) * kQ16 / mss, 1u << 24));
    switch (h.cc) {
      case CcState::kFastRecovery:
        if (seq_ge(ack, loss(h).recover)) {  // full ACK: deflate to ssthresh
          h.cc = CcState::kCongestionAvoidance;
          h.cwnd_q16 = clamp_cwnd(uint64_t(h.ssthresh_seg) * kQ16);
          // The decrease is read on a round wholly after recovery.
          if (h.flags & kHfMdPending) start_round(h);
          // A full ACK that still SACKs data above a hole: Linux leaves recovery and enters it
          // again on this ACK, even when the hole's resend went out during the first recovery
          // (then no new resend shows it). Measured on the lab captures: loss events exact
          // 27/30 -> 29/30 (reno) and 27/30 -> 30/30 (cubic).
          if (sacks_above) start_loss_event(f, d, false);
        }
        break;
      case CcState::kTimeoutRecovery:
        h.cwnd_q16 = clamp_cwnd(uint64_t(h.cwnd_q16) + acked_q16);
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
        // kGrowthAlphaPermille segments per window of ACKs.
        h.cwnd_q16 = clamp_cwnd(h.cwnd_q16 + uint64_t(acked_q16) * kQ16 * kGrowthAlphaPermille /
                                                 1000 / std::max(h.cwnd_q16, kQ16));
        break;
    }
    if (seq_ge(ack, h.round_end)) end_round(f, d);
    if (LossState* l = loss_if_any(h)) {
      for (int i = 0; i < LossState::kHoles; ++i) {
        if (seq_ge(ack, l->hole_hi[i])) l->hole_lo[i] = l->hole_hi[i];  // acked: gap is history
      }
    }
  } else if (ack == h.snd_una && p.payload_len == 0 && !(p.flags & (kSyn | kFin | kRst)) &&
             h.snd_max != h.snd_una) {
    if (h.dupacks != HalfFlow::kMaxDupacks) ++h.dupacks;
  }
}

void Tracker::on_timestamp_echo(Flow& f, Dir d, uint32_t tsecr, uint32_t now_us) {
  HalfFlow& h = f.h(d);
  if (!(h.flags & kHfTsPending)) return;
  if (tsecr == h.ts_val) {
    h.flags &= ~kHfTsPending;
    rtt_between(f, d, h.ts_us, now_us, RttSource::kTimestamp);
  } else if (seq_gt(tsecr, h.ts_val)) {
    h.flags &= ~kHfTsPending;  // the echo of our value was missed
  }
}

Sample Tracker::base_sample(const Flow& f, SampleKind kind) const {
  Sample s;
  s.ts_ns = f.last_ns;
  s.kind = kind;
  const bool client_lo = f.client_is_lo;
  s.client = client_lo ? f.key.lo_addr : f.key.hi_addr;
  s.server = client_lo ? f.key.hi_addr : f.key.lo_addr;
  s.client_port = client_lo ? f.key.lo_port : f.key.hi_port;
  s.server_port = client_lo ? f.key.hi_port : f.key.lo_port;
  return s;
}

void Tracker::rtt_between(Flow& f, Dir d, uint32_t sent_us, uint32_t now_us, RttSource src) {
  // Capture timestamps that go backwards (reordered by the capture, as in
  // tcptrace_hardware_dups.dmp) put the ACK before its segment: the unsigned difference wrapped to
  // about 71 minutes (2^32 us). Not a measurement.
  if (now_us < sent_us) {
    ++emit_.counters->rtt_below_resolution;
    return;
  }
  rtt_sample(f, d, now_us - sent_us, src);
}

void Tracker::rtt_sample(Flow& f, Dir d, uint32_t rtt_us, RttSource src) {
  if (rtt_us < cfg_.rtt_resolution_us) {
    ++emit_.counters->rtt_below_resolution;
    return;
  }
  HalfFlow& h = f.h(d);
  if (src != RttSource::kHandshake) {
    h.rtt_sum_us += rtt_us;
    if (h.rtt_count == 0 || rtt_us < h.rtt_min_us) h.rtt_min_us = rtt_us;
    if (rtt_us > h.rtt_max_us) h.rtt_max_us = rtt_us;
    ++h.rtt_count;
  }
  if (h.srtt_us == 0) {  // RFC 6298 2.2 and 2.3
    h.srtt_us = rtt_us;
    h.rttvar_us = rtt_us / 2;
  } else {
    const uint32_t err = h.srtt_us > rtt_us ? h.srtt_us - rtt_us : rtt_us - h.srtt_us;
    h.rttvar_us = h.rttvar_us - h.rttvar_us / 4 + err / 4;
    h.srtt_us = h.srtt_us - h.srtt_us / 8 + rtt_us / 8;
  }
  // Only the server's data (and the handshake) measure the path to the client's network.
  if (d != Dir::kS2C) return;
  Sample s = base_sample(f, SampleKind::kRtt);
  s.rtt_source = src;
  s.value = rtt_us;
  emit_.sample(s);
}

void Tracker::wc_sample(Flow& f, Dir d, uint32_t wc_seg, WcReason why, bool limited) {
  HalfFlow& h = f.h(d);
  // Sound samples only (README, "Sound samples"): a flight with a sequence jump, or a connection
  // picked up mid-stream whose flights never exceeded 2 segments (lone ACKs and data segments
  // make such flows at will), gives no W_c.
  if (h.seq_jump) {
    if (d == Dir::kS2C) ++emit_.counters->wc_unsound_seq_jump;
    return;
  }
  if (!f.handshake && h.max_flight_seg < kMinPickupFlightSegments) {
    if (d == Dir::kS2C) ++emit_.counters->wc_unsound_pickup;
    return;
  }
  if (h.wc_count < 2) {
    // A loss sample is kept in the LossState its loss took; the end-of-connection one (the
    // only one of a direction that saw no loss) goes into the record in close().
    if (why != WcReason::kEndOfConnection) loss(h).wc_first[h.wc_count] = sat16(wc_seg);
    if (limited) h.flags |= h.wc_count == 0 ? kHfWcLimited0 : kHfWcLimited1;
  }
  if (h.wc_count != UINT8_MAX) ++h.wc_count;
  if (d != Dir::kS2C) return;  // the window the server's connections get toward the client
  Sample s = base_sample(f, SampleKind::kWc);
  s.wc_reason = why;
  s.cwnd_limited = limited;
  s.value = wc_seg;
  emit_.sample(s);
}

void Tracker::close(Flow& f, CloseReason reason) {
  // End-of-connection W_c: a sender that never lost a segment ends with its current window.
  uint16_t end_wc[2] = {};
  for (Dir d : {Dir::kC2S, Dir::kS2C}) {
    HalfFlow& h = f.h(d);
    // A window under one segment is no window: a sender whose only data began below its ISN
    // and was acked a byte at a time (found by fuzz_pipeline) ended with cwnd 51/65536 and
    // made a W_c sample of 0.
    if (unique_bytes(h) > 0 && !(h.flags & kHfLossSeen) && cwnd_segments(h) >= 1) {
      // An evicted flow's window is cut short (a flood pushed it out): not its W_c.
      if (reason == CloseReason::kEvicted) {
        if (d == Dir::kS2C) ++emit_.counters->wc_unsound_evicted;
        continue;
      }
      const uint32_t w = cwnd_segments(h);
      end_wc[static_cast<int>(d)] = sat16(w);
      wc_sample(f, d, w, WcReason::kEndOfConnection, (h.flags & kHfRoundLimited) != 0);
    }
  }
  FlowRecord r;
  const bool client_lo = f.client_is_lo;
  r.client = client_lo ? f.key.lo_addr : f.key.hi_addr;
  r.server = client_lo ? f.key.hi_addr : f.key.lo_addr;
  r.client_port = client_lo ? f.key.lo_port : f.key.hi_port;
  r.server_port = client_lo ? f.key.hi_port : f.key.lo_port;
  r.ip_version = f.ip_v6 ? 6 : 4;
  r.vlan = f.vlan;
  r.handshake_seen = f.handshake;
  r.close = reason;
  r.first_ns = f.base_ns;
  r.last_ns = f.last_ns;
  r.syn_synack_us = f.syn_synack_us;
  r.synack_ack_us = f.synack_ack_us;
  if (f.syn_synack_us >= 0 && f.synack_ack_us >= 0)
    r.hs_rtt_us = int32_t(std::min<int64_t>(int64_t(f.syn_synack_us) + f.synack_ack_us, INT32_MAX));
  static const LossState kNoLoss{};
  for (Dir d : {Dir::kC2S, Dir::kS2C}) {
    HalfFlow& h = f.h(d);
    const HalfFlow& peer = f.h(opposite(d));
    const LossState* lp = loss_if_any(h);
    const LossState& l = lp ? *lp : kNoLoss;
    HalfRecord& o = d == Dir::kC2S ? r.c2s : r.s2c;
    o.bytes = h.bytes;
    o.unique_bytes = unique_bytes(h);
    o.packets = h.packets;
    o.data_packets = h.data_packets;
    o.rexmt_fast = l.rexmt_fast;
    o.rexmt_timeout = l.rexmt_timeout;
    o.rexmt_packets = uint32_t(l.rexmt_fast) + l.rexmt_timeout + l.rexmt_other;
    o.rexmt_spurious = l.rexmt_spurious;
    o.dsacks = l.dsacks;
    o.reordered_packets = l.reordered;
    o.capture_dups = l.capture_dups;
    o.loss_events_fast = l.loss_fast;
    o.loss_events_timeout = l.loss_timeout;
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < kLossFlightClasses; ++k) o.loss_by_flight[c][k] = l.loss_by_flight[c][k];
    }
    o.timeout_wait_us = l.timeout_wait_us;
    o.rtt_count = h.rtt_count;
    o.rtt_min_us = h.rtt_min_us;
    o.rtt_max_us = h.rtt_max_us;
    o.rtt_sum_us = h.rtt_sum_us;
    o.mss = h.mss_opt ? h.mss_opt : h.smss;
    o.wscale = h.wscale;
    o.sack_permitted = (h.flags & kHfSackPermitted) && (peer.flags & kHfSackPermitted);
    o.timestamps = (h.flags & kHfTimestamps) && (peer.flags & kHfTimestamps);
    o.max_flight_segments = h.max_flight_seg;
    o.wc_count = h.wc_count;
    o.wc_kept = std::min<uint8_t>(h.wc_count, 2);
    for (int i = 0; i < o.wc_kept; ++i) o.wc_segments[i] = l.wc_first[i];
    if (end_wc[static_cast<int>(d)]) o.wc_segments[0] = end_wc[static_cast<int>(d)];
    o.wc_cwnd_limited_mask =
        uint8_t(((h.flags & kHfWcLimited0) ? 1 : 0) | ((h.flags & kHfWcLimited1) ? 2 : 0));
    o.md_permille = l.md_permille;
    if (h.data_packets) {
      o.first_data_ns = f.base_ns + uint64_t(h.first_data_us) * 1000;
      o.last_data_ns = f.base_ns + uint64_t(h.last_data_us) * 1000;
    }
    if (h.loss != 0) {
      pool_.give_back(h.loss);
      h.loss = 0;
      count_loss_states();
    }
  }
  emit_.record(r);
}

}  // namespace spand
