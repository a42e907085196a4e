// Where a W_c sample is made (docs/DESIGN.md, "Definitions"): at a loss detected in congestion
// avoidance, the replica's cwnd minus one segment; at a connection's first loss in its first
// slow start, half the replica's cwnd (a lower bound); at the end of a connection that never
// lost a segment, its cwnd. Only sound flights count (README, "Sound samples"), and only the
// server's direction emits samples; both directions' counts go into the flow record.
#include "dataplane/tracker_internal.hpp"

namespace spand {

using namespace tracker_detail;

// Called by start_loss_event (tracker_loss.cpp) before the replica cuts its window.
void Tracker::wc_at_loss(Flow& f, Dir d) {
  HalfFlow& h = f.h(d);
  const uint32_t cwnd_seg = cwnd_segments(h);
  if (h.cc == CcState::kSlowStart && !(h.flags & kHfLossSeen)) {
    // The connection's first loss, in its first slow start: the window doubles each round, so
    // the round before this one, about half the window, went through whole. A lower bound of
    // the window the path carries (as an application-limited end is), and the one reading a
    // path gives where every sender overflows the buffer in slow start (DESIGN.md, "W_c
    // sample"); never more than the largest flight seen. Not after a timeout's restart, whose
    // window says how far the sender got back, not what the path holds.
    uint32_t half = cwnd_seg / 2;
    if (half > h.max_flight_seg) half = h.max_flight_seg;
    wc_sample(f, d, half > 1 ? half : 1, WcReason::kLossInSlowStart, false);
    return;
  }
  // A sender seen to leave slow start without a loss is in congestion avoidance here too
  // (tracker_cwnd.hpp, kSsFlatSends).
  if (h.cc != CcState::kCongestionAvoidance) return;
  // W_c (DESIGN.md): cwnd at the loss minus one segment.
  wc_sample(f, d, cwnd_seg > 1 ? cwnd_seg - 1 : 1, WcReason::kLossInCongestionAvoidance,
            (h.flags & kHfRoundLimited) != 0);
}

// End-of-connection W_c: a sender that never lost a segment ends with its current window.
void Tracker::wc_at_close(Flow& f, CloseReason reason, uint16_t end_wc[2]) {
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
  // start_loss_event has counted the loss that takes this sample and read the decrease of the
  // one before it: the flavour as far as the losses so far show it (the flow record's verdict
  // is the same rule at close).
  if (const LossState* l = loss_if_any(h)) {
    s.sender = classify_sender(uint32_t(l->loss_fast) + l->loss_timeout, l->sender);
  }
  emit_.sample(s);
}

}  // namespace spand
