// The tracker's private header: constants and small helpers that the tracker_*.cpp files share,
// inline so that every caller gets them inlined (the per-packet path). Not for other files.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dataplane/counters.hpp"
#include "dataplane/tracker.hpp"

namespace spand {

namespace tracker_detail {

constexpr uint32_t kRelMaxUs = 0xF000'0000u;  // rebase relative times before they can overflow
constexpr uint32_t kInitialRtoUs = 1'000'000;
// A connection picked up mid-stream gives W_c samples only once a flight of this many segments
// was seen (one data segment and an ACK make a "connection" at will).
constexpr uint16_t kMinPickupFlightSegments = 3;
constexpr uint32_t kQ16 = 65536;                  // cwnd fixed point: 1/65536 segment
constexpr uint64_t kCwndMaxQ16 = 0xFFFF'0000ull;  // 65535 segments
// The segment size assumed before the sender's is known.
constexpr uint32_t kDefaultMss = 1460;

inline void bump(uint16_t& c) {
  if (c != UINT16_MAX) ++c;
}

inline uint32_t clamp_cwnd(uint64_t q16) {
  return uint32_t(q16 > kCwndMaxQ16 ? kCwndMaxQ16 : q16);
}

inline uint16_t sat16(uint32_t v) {
  return v > UINT16_MAX ? UINT16_MAX : uint16_t(v);
}

}  // namespace tracker_detail

// One data segment (or FIN) in the sender's sequence space.
struct Tracker::Segment {
  uint32_t seq;   // first byte (after the SYN when the segment carries one)
  uint32_t len;   // payload bytes
  uint32_t pend;  // end of the payload
  uint32_t end;   // end in sequence space (a FIN counts one)
};

inline LossState& Tracker::loss(HalfFlow& h) {
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

inline LossState* Tracker::loss_if_any(HalfFlow& h) {
  return h.loss ? &pool_.at(h.loss) : nullptr;
}

inline void Tracker::count_loss_states() {
  emit_.counters->loss_states = pool_.in_use();
  emit_.counters->loss_states_peak = pool_.peak_in_use();
}

inline uint64_t Tracker::unique_bytes(HalfFlow& h) {
  const LossState* l = loss_if_any(h);
  return h.bytes - (l ? l->repeat_bytes : 0);
}

inline uint32_t Tracker::flight_segments(const HalfFlow& h) {
  const uint32_t flight = h.snd_max - h.snd_una;
  const uint32_t mss = h.smss ? h.smss : tracker_detail::kDefaultMss;
  return (flight + mss - 1) / mss;
}

inline uint32_t Tracker::rto_us(const HalfFlow& h) const {
  if (h.srtt_us == 0) return tracker_detail::kInitialRtoUs;  // RFC 6298 2.1: no sample yet
  // RFC 6298 2.3 with Linux's floor, which applies to the variance term: srtt + max(4 rttvar,
  // 200 ms). A tail-loss probe (2 srtt) then comes before it, as in the kernel.
  return h.srtt_us + std::max(cfg_.min_rto_us, 4 * h.rttvar_us);
}

inline Sample Tracker::base_sample(const Flow& f, SampleKind kind) const {
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

}  // namespace spand
