// RTT samples, the steps every packet takes (tracker.cpp calls them): timing new data, the ACK
// or timestamp echo that completes a sample. Inline, so a build without LTO inlines them too; the
// samples themselves are made in tracker_rtt.cpp.
#pragma once

#include "dataplane/tracker_internal.hpp"

namespace spand {

// New data leaving: time it when no segment is timed, and note its TSval when no echo is awaited.
inline void Tracker::time_segment(HalfFlow& h, const ParsedPacket& p, uint32_t end,
                                  uint32_t now_us) {
  if (p.payload_len == 0) return;
  if (!(h.flags & kHfTimedValid)) {
    h.timed_end = end;
    h.timed_us = now_us;
    h.flags |= kHfTimedValid;
  }
  if (p.opt.has_ts && !(h.flags & kHfTsPending)) {
    h.ts_val = p.opt.tsval;
    h.ts_us = now_us;
    h.flags |= kHfTsPending;
  }
}

// An ACK that covers the timed segment completes a data-to-ACK sample.
inline void Tracker::rtt_on_ack(Flow& f, Dir d, uint32_t ack, uint32_t now_us) {
  HalfFlow& h = f.h(d);
  if ((h.flags & kHfTimedValid) && seq_ge(ack, h.timed_end)) {
    h.flags &= ~kHfTimedValid;
    rtt_between(f, d, h.timed_us, now_us, RttSource::kDataToAck);
  }
}

inline void Tracker::on_timestamp_echo(Flow& f, Dir d, uint32_t tsecr, uint32_t now_us) {
  HalfFlow& h = f.h(d);
  if (!(h.flags & kHfTsPending)) return;
  if (tsecr == h.ts_val) {
    h.flags &= ~kHfTsPending;
    rtt_between(f, d, h.ts_us, now_us, RttSource::kTimestamp);
  } else if (seq_gt(tsecr, h.ts_val)) {
    h.flags &= ~kHfTsPending;  // the echo of our value was missed
  }
}

inline void Tracker::rtt_between(Flow& f, Dir d, uint32_t sent_us, uint32_t now_us, RttSource src) {
  // Capture timestamps that go backwards (reordered by the capture, as in
  // tcptrace_hardware_dups.dmp) put the ACK before its segment: the unsigned difference wrapped to
  // about 71 minutes (2^32 us). Not a measurement.
  if (now_us < sent_us) {
    ++emit_.counters->rtt_below_resolution;
    return;
  }
  rtt_sample(f, d, now_us - sent_us, src);
}

}  // namespace spand
