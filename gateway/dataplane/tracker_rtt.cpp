// Where RTT samples are taken: data to ACK (one timed segment at a time, Karn: none for resent
// data), TSval to its TSecr echo, and the handshake (its legs are timed in tracker_handshake.cpp);
// every sample passes rtt_sample(), which also keeps srtt and rttvar for the RTO (rto_us() in
// tracker_internal.hpp). Only the server's direction emits samples.
#include "dataplane/tracker_rtt.hpp"

namespace spand {

// Karn: a resend of the timed segment makes its sample ambiguous.
void Tracker::karn_on_resend(HalfFlow& h, uint32_t seq) {
  if ((h.flags & kHfTimedValid) && seq_lt(seq, h.timed_end)) h.flags &= ~kHfTimedValid;
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

}  // namespace spand
