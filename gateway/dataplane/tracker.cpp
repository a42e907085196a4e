// One packet's walk through the tracker: the flow's clock, the direction, the SYN, RST, ACK, data
// and FIN steps in that order, each handed to the file of its concern (tracker.hpp lists them).
#include "dataplane/tracker.hpp"

#include <algorithm>

#include "dataplane/tracker_cwnd.hpp"
#include "dataplane/tracker_internal.hpp"
#include "dataplane/tracker_loss.hpp"
#include "dataplane/tracker_rtt.hpp"

namespace spand {

using namespace tracker_detail;

namespace {

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

inline void learn_segment_size(HalfFlow& h, const HalfFlow& peer, uint32_t len) {
  const uint32_t cap = mss_cap(h, peer);
  if (len > h.smss && (cap == 0 || len <= cap)) h.smss = uint16_t(std::min<uint32_t>(len, 65535));
  if (h.smss == 0 && cap) h.smss = uint16_t(cap);
}

// A flow is verified once its handshake completed or both sides sent packets and one of them
// data (the flow table's eviction prefers unverified flows).
inline void note_verified(Flow& f, Dir d, const ParsedPacket& p) {
  if (f.verified) return;
  const HalfFlow& snd = f.h(d);
  const HalfFlow& other = f.h(opposite(d));
  if (f.handshake_done ||
      (other.packets && (p.payload_len || snd.data_packets || other.data_packets)))
    f.verified = 1;
}

// IPv4 IDs: a datagram not newer than the newest this sender emitted is a copy made by the
// capture (a resend gets a fresh ID), not a second transmission. Returns whether it is old.
inline bool note_ip_id(HalfFlow& snd, const ParsedPacket& p) {
  if (p.ip_id == 0 || p.ip_version != 4) return false;
  if ((snd.flags & kHfIpIdKnown) && int16_t(p.ip_id - snd.max_ip_id) <= 0) return true;
  snd.max_ip_id = p.ip_id;
  snd.flags |= kHfIpIdKnown;
  return false;
}

inline void on_fin(Flow& f, HalfFlow& snd) {
  snd.flags |= kHfFinSeen;
  if (f.close_kind != uint8_t(CloseReason::kRst)) f.close_kind = uint8_t(CloseReason::kFin);
  if ((f.half[0].flags & kHfFinSeen) && (f.half[1].flags & kHfFinSeen)) {
    f.phase = FlowPhase::kClosing;
  }
}

// A sender's sequence space starts at its SYN, or at its first segment seen (a connection picked
// up mid-stream); the first ACK it gets, or its first data when none came, is snd_una.
inline void start_sequence_space(HalfFlow& h, uint32_t seq) {
  if (!(h.flags & kHfSeqKnown)) {
    h.flags |= kHfSeqKnown;
    h.isn = seq;
    h.snd_max = seq;
    h.round_end = seq;
  }
  if (!(h.flags & kHfAckKnown)) {
    h.snd_una = h.snd_max;
    h.flags |= kHfAckKnown;
  }
}

inline void count_bytes(HalfFlow& h, uint32_t seq, uint32_t len, uint16_t sig, uint32_t now_us) {
  h.bytes += len;
  if (len > 0) {
    if (++h.data_packets == 1) h.first_data_us = now_us;
    h.last_data_us = now_us;
  }
  h.last_seq = seq;
  h.last_sig = sig;
}

}  // namespace

void Emitter::sample(const Sample& s) {
  // Made visible to the control side once per burst (Worker::publish_outputs()).
  if (!samples->push_unpublished(s)) {
    ++counters->ring_full_samples;
    return;
  }
  if (s.kind == SampleKind::kWc) {
    ++counters->samples_wc;
    if (s.wc_reason == WcReason::kLossInSlowStart) ++counters->samples_wc_slow_start;
  }
  if (s.kind == SampleKind::kRtt) ++counters->samples_rtt;
  if (s.kind == SampleKind::kDecrease) ++counters->samples_decrease;
}

void Emitter::record(const FlowRecord& r) {
  // Made visible once per burst too: the control side polls the ring's index, so each store to
  // it takes the index's line back from the control side's core.
  if (!flows->push_unpublished(r)) ++counters->ring_full_flows;
}

void Tracker::on_packet(Flow& f, const ParsedPacket& p, bool src_is_lo) {
  const uint32_t now_us = advance_clock(f, p);
  const Dir d = (src_is_lo == bool(f.client_is_lo)) ? Dir::kC2S : Dir::kS2C;
  HalfFlow& snd = f.h(d);
  ++snd.packets;
  note_verified(f, d, p);
  if (p.vlan_outer && !f.vlan) f.vlan = p.vlan_outer;
  const bool old_ip_id = note_ip_id(snd, p);

  if ((p.flags & kSyn) && !on_syn(f, d, p, now_us, old_ip_id)) return;
  if (p.flags & kRst) on_rst(f, d, p, now_us);
  if (d == Dir::kC2S && f.synack_seen && !f.handshake_done) on_handshake_ack(f, p, now_us);

  if (p.flags & kAck) on_ack(f, opposite(d), p, now_us);
  if (p.opt.has_ts && (p.flags & kAck)) on_timestamp_echo(f, opposite(d), p.opt.tsecr, now_us);
  if (p.payload_len > 0 || (p.flags & kFin)) on_data(f, d, p, now_us, old_ip_id);
  if (p.flags & kFin) on_fin(f, snd);
}

// The flow's clock: microseconds since f.base_ns, from the packet's timestamp.
uint32_t Tracker::advance_clock(Flow& f, const ParsedPacket& p) {
  if (p.ts_ns > f.last_ns) f.last_ns = p.ts_ns;
  // Capture time can step back (merged traces); treat such a packet as arriving "now".
  const uint64_t t_ns = p.ts_ns > f.base_ns ? p.ts_ns : f.base_ns;
  // (t - base) / 1000 >= kRelMaxUs, without the division; rebase() leaves base below t.
  if (t_ns - f.base_ns >= uint64_t(kRelMaxUs) * 1000) rebase(f, t_ns);
  return uint32_t((t_ns - f.base_ns) / 1000);
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
    if (h.loss) fix(pool_.at(h.loss).sender.last_ack_us);
  }
  f.base_ns += shift_us * 1000;
}

// An ACK for the data of direction d: SACK blocks, then, when it acknowledges new data, the RTT
// sample it completes, the replica's growth and the gaps it closes; else perhaps a duplicate.
void Tracker::on_ack(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us) {
  HalfFlow& h = f.h(d);  // the data sender whose bytes this ACK covers
  const uint32_t ack = p.ack;
  if (!(h.flags & kHfSeqKnown)) return;  // nothing seen from that sender yet
  if (!(h.flags & kHfAckKnown)) {
    h.snd_una = ack;
    h.flags |= kHfAckKnown;
    return;
  }
  const uint32_t sacked_above = on_sack_blocks(h, p);
  if (seq_gt(ack, h.snd_max)) return;  // acks bytes the monitor never saw sent: ignore
  if (h.loss) pool_.at(h.loss).sender.last_ack_us = now_us;  // the ACK clock, duplicates too

  if (seq_gt(ack, h.snd_una)) {
    const uint32_t acked = ack - h.snd_una;
    h.snd_una = ack;
    h.last_progress_us = now_us;
    h.dupacks = 0;
    rtt_on_ack(f, d, ack, now_us);
    cwnd_on_ack(f, d, ack, acked, sacked_above);
    forget_acked_gaps(h, ack);
  } else if (ack == h.snd_una && p.payload_len == 0 && !(p.flags & (kSyn | kFin | kRst)) &&
             h.snd_max != h.snd_una) {
    if (h.dupacks != HalfFlow::kMaxDupacks) ++h.dupacks;
  }
}

// Data (or a FIN) from direction d: a capture copy is dropped here; new data extends the
// sequence space, older data is classified (tracker_loss.cpp); then the flight bounds the
// replica from below.
void Tracker::on_data(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id) {
  HalfFlow& h = f.h(d);
  Segment s;
  s.seq = p.seq;
  if (p.flags & kSyn) ++s.seq;  // data on a SYN starts after it
  s.len = p.payload_len;
  s.pend = s.seq + s.len;
  s.end = s.pend + ((p.flags & kFin) ? 1 : 0);

  start_sequence_space(h, s.seq);
  learn_segment_size(h, f.h(opposite(d)), s.len);

  const bool below = seq_lt(s.seq, h.snd_max);
  const bool ipid_ok = p.ip_version == 4 && p.ip_id != 0;
  const uint16_t sig = fold_sig(p);
  if (below && is_capture_copy(h, s, sig, ipid_ok, old_ip_id, now_us)) {
    bump(loss(h).capture_dups);
    return;  // the sender sent it once: nothing else changes
  }
  count_bytes(h, s.seq, s.len, sig, now_us);

  // The retransmission timer starts when data leaves with nothing outstanding (RFC 6298 5.1).
  if (h.snd_max == h.snd_una) h.last_progress_us = now_us;
  restart_after_idle(h, now_us);

  if (!below) {
    on_new_data(f, d, p, s, now_us);
  } else {
    on_old_data(f, d, s, now_us);
  }
  h.last_send_us = now_us;
  bound_cwnd_by_flight(h, below);
}

// Data at or above the highest sequence sent: a gap before it is remembered, and the segment
// may be timed for an RTT sample.
void Tracker::on_new_data(Flow& f, Dir d, const ParsedPacket& p, const Segment& s,
                          uint32_t now_us) {
  HalfFlow& h = f.h(d);
  if (seq_gt(s.seq, h.snd_max)) note_gap(f, d, s.seq);
  note_send_clock(h, now_us);
  h.snd_max = s.end;
  time_segment(h, p, s.end, now_us);
}

}  // namespace spand
