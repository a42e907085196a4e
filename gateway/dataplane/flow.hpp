// Per-connection state: one canonical key for both directions and two half-flows (client to
// server, server to client), as ePPing's dual_flow_state. Kept compact: the table holds up to
// millions of these. Times inside a flow are microseconds relative to `base_ns` (32 bits,
// rebased before they overflow); sequence numbers are raw 32-bit and compared modulo 2^32.
#pragma once

#include <cstdint>

#include "dataplane/flow_record.hpp"
#include "dataplane/packet.hpp"

namespace spand {

enum class Dir : uint8_t { kC2S = 0, kS2C = 1 };
inline Dir opposite(Dir d) {
  return d == Dir::kC2S ? Dir::kS2C : Dir::kC2S;
}

// Sequence-space comparisons modulo 2^32 (RFC 1982 style).
inline bool seq_lt(uint32_t a, uint32_t b) {
  return int32_t(a - b) < 0;
}
inline bool seq_le(uint32_t a, uint32_t b) {
  return int32_t(a - b) <= 0;
}
inline bool seq_gt(uint32_t a, uint32_t b) {
  return int32_t(a - b) > 0;
}
inline bool seq_ge(uint32_t a, uint32_t b) {
  return int32_t(a - b) >= 0;
}

// Connection key, canonical: address/port pair `lo` sorts before `hi`, so both directions of a
// connection produce the same key. VLAN tags are deliberately not part of it (one direction of a
// mirrored link may be tagged and the other not).
struct FlowKey {
  IpAddr lo_addr;
  IpAddr hi_addr;
  uint16_t lo_port = 0;
  uint16_t hi_port = 0;
  bool operator==(const FlowKey& o) const {
    return lo_port == o.lo_port && hi_port == o.hi_port && lo_addr == o.lo_addr &&
           hi_addr == o.hi_addr;
  }
};

// Builds the canonical key of a packet; `src_is_lo` tells which side sent it.
FlowKey make_key(const ParsedPacket& p, bool& src_is_lo);

// The flow table's hash is keyed (issue 12: 40,000 SYNs whose 4-tuples were chosen to collide
// under an unkeyed hash took 300 times as long as random ones). Multilinear multiply-shift over
// the key's nine 32-bit words with ten 64-bit random keys (Dietzfelbinger's vector hashing): for
// two distinct flow keys the probability that their 32-bit hashes collide is at most 2^-31 over
// the choice of the secret, so tuples chosen without knowing it collide no more than random
// ones. Symmetric because the key is canonical.
struct FlowHashSecret {
  uint64_t k[10];
  // The terms of an IPv4-mapped key's constant words (the ::ffff marker of both addresses; the
  // zero words add nothing): hash_key() adds them at once for such keys.
  uint64_t v4_terms;
  // Expands a 64-bit seed (splitmix64). Replays use a fixed seed (kReplayHashSeed) so their output
  // is the same every time; live sources a random one (gateway_main.cpp, --hash-seed).
  static FlowHashSecret from_seed(uint64_t seed);
};
inline constexpr uint64_t kReplayHashSeed = 0x5350414e44u;  // "SPAND"
uint32_t hash_key(const FlowKey& k, const FlowHashSecret& secret);
// make_key() and hash_key() in one pass, for a packet that parse_frame() decoded (an IPv4
// packet's addresses are then IPv4-mapped: its key and hash come from the two 32-bit addresses).
FlowKey make_parsed_key(const ParsedPacket& p, const FlowHashSecret& secret, bool& src_is_lo,
                        uint32_t& hash);

// Congestion-control phase of the sender replica.
enum class CcState : uint8_t {
  kSlowStart = 0,
  kCongestionAvoidance = 1,
  kFastRecovery = 2,    // entered on 3 dupacks or SACK-detected loss; left when snd_una >= recover
  kTimeoutRecovery = 3  // after an RTO: slow start from cwnd 1 until snd_una >= recover
};

enum HalfFlag : uint16_t {
  kHfSynSeen = 1 << 0,
  kHfFinSeen = 1 << 1,
  kHfWcLimited0 = 1 << 2,  // the first kept W_c sample came from a cwnd-limited flight
  kHfSackPermitted = 1 << 3,
  kHfTimestamps = 1 << 4,
  kHfSeqKnown = 1 << 5,       // isn / snd_max initialized (from SYN or first segment)
  kHfAckKnown = 1 << 6,       // snd_una initialized (peer has acknowledged something)
  kHfLossSeen = 1 << 7,       // at least one loss event: no end-of-connection W_c sample
  kHfTimedValid = 1 << 8,     // timed segment pending for a data-to-ACK RTT sample
  kHfTsPending = 1 << 9,      // a TSval waits for its echo
  kHfWcLimited1 = 1 << 10,    // the second kept W_c sample came from a cwnd-limited flight
  kHfRoundLimited = 1 << 11,  // the current round's flight reached the replica's cwnd
  kHfMdPending = 1 << 12,     // measure the decrease once recovery ends
  kHfIpIdKnown = 1 << 13,     // max_ip_id is valid
  kHfSackHoles = 1 << 15,     // the peer's last ACK carried SACK blocks above the cumulative ACK
  kHfSynAckSent = 1 << 14,  // this side answered a SYN (simultaneous open sends SYN, then SYN-ACK)
};

// What one direction needs only once its segments stop arriving in order, once per sequence
// number and without loss: the gaps the monitor has not seen filled, the recovery in progress,
// the counters of resends, reordering, capture copies and DSACKs, and the W_c samples taken at
// losses. Most connections never need it, so it lives in a side pool (LossPool) and a half-flow
// holds its index: one cache line, taken at the first such event, returned when the flow closes.
struct alignas(64) LossState {
  // Unfilled gaps [hole_lo, hole_hi) below snd_max (empty when lo == hi): a segment landing in
  // one was never seen before at the monitor, so it is reordering, not a resend.
  static constexpr int kHoles = 3;
  uint32_t hole_lo[kHoles]{};
  uint32_t hole_hi[kHoles]{};
  uint32_t recover = 0;  // snd_max when the current recovery started (NewReno "recover")
  uint32_t cwnd_before_loss_q16 = 0;
  uint64_t repeat_bytes = 0;  // payload bytes sent again: unique bytes = bytes - repeat_bytes
  uint16_t md_permille = 0;
  // Counters (saturating at 65535).
  uint16_t rexmt_fast = 0;
  uint16_t rexmt_timeout = 0;
  uint16_t rexmt_other = 0;
  uint16_t rexmt_spurious = 0;
  uint16_t dsacks = 0;  // DSACK reports received for this sender's data
  uint16_t reordered = 0;
  uint16_t capture_dups = 0;
  uint16_t loss_fast = 0;
  uint16_t loss_timeout = 0;
  uint16_t wc_first[2]{};  // first W_c samples at losses (the rest go to --samples-out only)
  // Second cache line: TCP-SF's view of the loss events (Mellia, Meo, Casetti, ToN 2005).
  // Events by class (0 fast retransmit, 1 timeout) and by the flight at the loss
  // (loss_flight_class), and the time the sender sat waiting for its retransmission timer.
  uint16_t loss_by_flight[2][kLossFlightClasses]{};
  uint32_t timeout_wait_us = 0;
  // Sender identification (sender_id.hpp): decrease readings by band and the ACK clock.
  SenderReadings sender;
  // The recovery in progress began in congestion avoidance (not slow start): its pipe at the
  // full ACK bounds the window after it (Tracker::cwnd_on_ack).
  uint8_t recovery_from_ca = 0;
  // In timeout recovery: the end of the highest data resent since the RTO. A SACK-driven resend
  // below it resends a retransmission that was lost again (Tracker::classify_resend).
  uint32_t rto_resent_end = 0;
  // The end of the last segment resent as a tail-loss probe of the only segment out (0: none):
  // while it is unacknowledged, a resend of it again is the retransmission timer's
  // (Tracker::classify_resend).
  uint32_t probe_end = 0;
};
static_assert(sizeof(LossState) == 128);

// One direction's sender, as seen from the monitor: what every packet of a connection reads or
// writes. Rare state is in its LossState.
struct HalfFlow {
  // Totals.
  uint64_t bytes = 0;  // payload bytes, resends included (capture copies not)
  uint64_t rtt_sum_us = 0;

  // Sequence space.
  uint32_t isn = 0;      // first sequence number (SYN, or first segment when picked up mid-stream)
  uint32_t snd_max = 0;  // highest sequence sent + 1
  uint32_t snd_una = 0;  // highest cumulative ACK from the peer
  uint32_t round_end = 0;  // snd_max at the start of the current round (one flight)
  uint32_t timed_end = 0;  // Karn: end of the segment being timed for a data-to-ACK sample
  uint32_t ts_val = 0;     // TSval being timed for an echo sample
  uint32_t last_seq = 0;   // seq of the last data segment (capture-duplicate detection)

  // Times, microseconds relative to the flow's base.
  // Handshake: in kC2S the client's newest SYN (a resent one restarts the timer), in kS2C the
  // first SYN-ACK.
  uint32_t syn_us = 0;
  uint32_t timed_us = 0;
  uint32_t ts_us = 0;
  uint32_t last_send_us = 0;
  uint32_t last_progress_us = 0;  // last ACK of new data (the retransmission timer's restart)
  uint32_t first_data_us = 0;
  uint32_t last_data_us = 0;

  uint32_t packets = 0;
  uint32_t data_packets = 0;
  uint32_t rtt_count = 0;
  uint32_t rtt_min_us = 0;
  uint32_t rtt_max_us = 0;
  uint32_t srtt_us = 0;  // smoothed as RFC 6298, for the RTO and idle-restart guesses
  uint32_t rttvar_us = 0;

  // Congestion-control replica (windows in 1/65536 segment; at most 65535 segments).
  uint32_t cwnd_q16 = 0;
  uint32_t loss = 0;  // this direction's LossState in the tracker's pool (0: none yet)
  uint16_t ssthresh_seg = 0xffff;
  uint16_t smss = 0;              // sender segment size in bytes (options excluded)
  uint16_t mss_opt = 0;           // MSS option this side announced
  uint16_t round_flight_seg = 0;  // largest flight in the current round
  uint16_t max_flight_seg = 0;

  uint16_t max_ip_id = 0;  // newest IPv4 ID this sender used (capture-duplicate detection)
  uint16_t last_sig = 0;   // fold of ack/len/window of the last data segment
  uint16_t flags = 0;
  uint8_t wscale = 0xff;
  uint8_t wc_count = 0;  // W_c samples taken (saturating)
  CcState cc : 2 = CcState::kSlowStart;
  // Duplicate ACKs in a row, saturating at kMaxDupacks (the tracker only asks for 0, >= 1, >= 3).
  static constexpr uint8_t kMaxDupacks = 7;
  uint8_t dupacks : 3 = 0;
  // A segment started beyond snd_max by more than the allowed gap (Tracker::note_gap in
  // tracker_loss.cpp): the flight is not made of segments the monitor saw, so this direction
  // gives no W_c sample.
  uint8_t seq_jump : 1 = 0;
  // A gap of the LossState may be open (set with each gap, cleared when ACKs closed them all):
  // an ACK reads the LossState only then, not on every ACK after the direction's first loss.
  uint8_t gaps_open : 1 = 0;
  // Slow start: clean sends in a row that brought the flight back to its largest so far
  // without passing it (saturating); see Tracker::bound_cwnd_by_flight.
  uint8_t ss_flat_sends = 0;
};
static_assert(sizeof(HalfFlow) == 128);

constexpr uint8_t kCloseNone = 7;

enum class FlowPhase : uint8_t { kSynOnly = 0, kEstablished = 1, kClosing = 2 };

// Aligned to cache lines, and a whole number of them, so that a flow spans no line it does not
// use: the worker prefetches all of them per packet. Five lines: the shared part, then 128 bytes
// per direction.
struct alignas(64) Flow {
  // First cache line: what a lookup and the timeout sweep read (key, phase, last_ns).
  FlowKey key;
  uint16_t vlan = 0;
  FlowPhase phase : 2 = FlowPhase::kSynOnly;
  uint8_t close_kind : 3 = kCloseNone;  // CloseReason once FIN/RST seen
  uint8_t client_is_lo : 1 = 0;
  uint8_t handshake : 1 = 0;  // roles known from the SYN
  uint8_t synack_seen : 1 = 0;
  uint8_t ip_v6 : 1 = 0;
  uint8_t synack_resent : 1 = 0;  // Karn: no SYN-ACK-to-ACK leg
  uint8_t handshake_done : 1 = 0;
  // Seen to be a real connection: its handshake completed, or both sides sent packets and one
  // sent data. A lone ACK (a spoofed flood) never is: such flows are evicted first and never
  // displace a verified one (FlowTable::insert).
  uint8_t verified : 1 = 0;
  uint64_t base_ns = 0;  // time of the first packet; relative times count from here
  uint64_t last_ns = 0;  // time of the newest packet
  int32_t syn_synack_us = -1;
  int32_t synack_ack_us = -1;
  HalfFlow half[2];  // indexed by Dir

  HalfFlow& h(Dir d) { return half[static_cast<int>(d)]; }
};
static_assert(sizeof(Flow) == 320);

}  // namespace spand
