// The end of a connection: its end-of-connection W_c (tracker_wc.cpp), the flow record that
// --flows-out reports (docs/records.md), and its LossStates back to the pool.
#include "dataplane/tracker_internal.hpp"

namespace spand {

void Tracker::close(Flow& f, CloseReason reason) {
  uint16_t end_wc[2] = {};
  wc_at_close(f, reason, end_wc);
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
    o.sender = classify_sender(uint32_t(l.loss_fast) + l.loss_timeout, l.sender);
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
