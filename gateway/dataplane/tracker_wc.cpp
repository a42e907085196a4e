// Where a W_c sample is made (docs/DESIGN.md, "Definitions"): at a loss detected in congestion
// avoidance, the replica's cwnd minus one segment; at the end of a connection that never lost a
// segment, its cwnd. Only sound flights count (README, "Sound samples"), and only the server's
// direction emits samples; both directions' counts go into the flow record.
#include "dataplane/tracker_internal.hpp"

namespace spand {

using namespace tracker_detail;

namespace {

// A sender that left slow start without a loss (CUBIC's HyStart sets ssthresh to cwnd when the
// round trip grows) holds its flight at the window it had: each segment acknowledged lets one
// new segment out, where slow start lets two. The wire shows the flight coming back to its
// largest so far, again and again, without passing it. kSsFlatSends such clean sends in a row,
// at a window of at least kSsFlatMinSegments (Linux's hystart_low_window: HyStart acts from 16
// segments on), and a loss then is one in congestion avoidance at that window, as the kernel
// counts it (cwnd >= ssthresh). Lab capture pcaps/lab/cubic_3nets: the kernel's HyStart set
// ssthresh 5-40 ms before two losses (10.119.1.10:48251 at 59, 10.119.2.11:40559 at 59-60);
// the gateway, still in slow start, made no sample; now 58 and 58. Any count from 2 to 8 gave
// these two; 2 also fired on a flight held for two sends only, 2 segments past the kernel's
// window (SACK accounting, 10.119.3.10:45613). Reno never triggers it (stored reno capture:
// no sample added), a receiver-window-limited sender does (the window at its loss is then
// the one it held).
constexpr uint32_t kSsFlatSends = 4;
constexpr uint32_t kSsFlatMinSegments = 16;

}  // namespace

// Called by start_loss_event (tracker_loss.cpp) before the replica cuts its window.
void Tracker::wc_at_loss(Flow& f, Dir d) {
  HalfFlow& h = f.h(d);
  if (h.cc == CcState::kSlowStart && h.ss_flat_sends >= kSsFlatSends &&
      h.max_flight_seg >= kSsFlatMinSegments) {
    // Left slow start without a loss (see kSsFlatSends): W_c is the window it held, less one.
    // The replica itself stays as it was (its cut at this loss, the end-of-connection W_c).
    wc_sample(f, d, h.max_flight_seg - 1u, WcReason::kLossInCongestionAvoidance, true);
    return;
  }
  if (h.cc != CcState::kCongestionAvoidance) return;
  const uint32_t cwnd_seg = cwnd_segments(h);
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
  emit_.sample(s);
}

}  // namespace spand
