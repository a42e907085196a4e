// Connection setup: who is the client, when a SYN starts a new connection on a known 4-tuple,
// the SYN's options, the two legs of the handshake RTT (Karn for resent SYNs and SYN-ACKs) and a
// refused connection's RST.
#include "dataplane/tracker_internal.hpp"

namespace spand {

using namespace tracker_detail;

namespace {

bool addr_in(const Prefix& pfx, const IpAddr& a) {
  return prefix_with_len(a, pfx.len) == pfx;
}

}  // namespace

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

bool Tracker::on_syn(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id) {
  HalfFlow& snd = f.h(d);
  const bool synack = (p.flags & (kSyn | kAck)) == (kSyn | kAck);
  const bool resent_syn = synack ? (snd.flags & kHfSynAckSent) != 0
                                 : (snd.flags & (kHfSynSeen | kHfSynAckSent)) == kHfSynSeen;
  if (resent_syn && p.seq == snd.isn) {
    LossState& l = loss(snd);
    if (old_ip_id) {
      bump(l.capture_dups);
      return false;
    }
    // A resent SYN or SYN-ACK: the SYN timer's, or a SYN-ACK answering a resent SYN. Karn: the
    // SYN-ACK-to-ACK leg becomes ambiguous; the SYN-to-SYN-ACK leg restarts from the newest SYN
    // below. The handshake's resends are one timeout event, as an RTO backing off is (the
    // sender gets no ACK between them): the first starts it, the timer backing off and the
    // answers to resent SYNs stay in it. Lab truth_matrix.py, path b35_q1_qa (SYN-ACKs lost in
    // a full bottleneck): the server's timer resent the SYN-ACK after 1 s, the client's timer
    // its SYN about as soon, and the server answered that SYN with a third SYN-ACK; the kernel
    // (tcp_retransmit_synack) resent twice in one episode, the gateway counted two timeout
    // events.
    const bool first = l.rexmt_timeout == 0;
    bump(l.rexmt_timeout);
    if (first) {
      bump(l.loss_timeout);
      ++emit_.counters->loss_events[size_t(d)][1];
      bump(l.loss_by_flight[1][0]);  // the SYN was the whole flight
    }
    // The SYN timer ran from the previous SYN (a SYN-ACK: from the previous SYN-ACK).
    HalfFlow& timer = synack ? f.h(Dir::kS2C) : snd;
    l.timeout_wait_us += now_us - timer.syn_us;
    if (synack) timer.syn_us = now_us;
    if (p.flags & kAck) f.synack_resent = 1;
  }
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
  return true;
}

void Tracker::on_rst(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us) {
  // A refused connection: the RST-ACK answers the SYN, one leg of the handshake RTT.
  if (d == Dir::kS2C && (p.flags & kAck) && !f.synack_seen && f.syn_synack_us < 0 &&
      (f.h(Dir::kC2S).flags & kHfSynSeen) && p.ack == f.h(Dir::kC2S).isn + 1) {
    f.syn_synack_us = int32_t(now_us - f.h(Dir::kC2S).syn_us);
  }
  f.close_kind = uint8_t(CloseReason::kRst);
  f.phase = FlowPhase::kClosing;
}

void Tracker::on_handshake_ack(Flow& f, const ParsedPacket& p, uint32_t now_us) {
  // Handshake completes: the client's first ACK of the SYN-ACK.
  if ((p.flags & (kAck | kSyn)) != kAck || p.ack != f.h(Dir::kS2C).isn + 1) return;
  f.handshake_done = 1;
  if (!f.synack_resent) f.synack_ack_us = int32_t(now_us - f.h(Dir::kS2C).syn_us);
  if (f.phase == FlowPhase::kSynOnly) f.phase = FlowPhase::kEstablished;
  // Legs of up to 35 minutes each fit int32; their sum is taken in 64 bits (it overflowed).
  const int64_t hs = int64_t(f.syn_synack_us) + f.synack_ack_us;
  if (f.syn_synack_us >= 0 && f.synack_ack_us >= 0 && hs <= INT32_MAX) {
    rtt_sample(f, Dir::kS2C, uint32_t(hs), RttSource::kHandshake);
  }
}

}  // namespace spand
