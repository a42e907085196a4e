// What the gateway reports about one finished connection (--flows-out). Plain data so it crosses
// the ring from a data lcore to the writer by value.
#pragma once

#include <cstdint>

#include "dataplane/packet.hpp"
#include "dataplane/sender_id.hpp"

namespace spand {

enum class CloseReason : uint8_t {
  kFin = 0,
  kRst = 1,
  kTimeout = 2,
  kEndOfCapture = 3,
  kEvicted = 4
};
const char* close_reason_name(CloseReason r);

// Classes of the flight (segments outstanding) at a loss event, as TCP Smart Framing reads
// Tstat: a loss needs three duplicate ACKs behind it to be recovered by fast retransmit, so a
// flight of 1-3 segments recovers by timeout unless limited transmit or SACK adds to it.
inline constexpr int kLossFlightClasses = 6;  // 1, 2, 3, 4-7, 8-15, 16 or more segments
inline int loss_flight_class(uint32_t flight_segments) {
  if (flight_segments <= 3) return flight_segments == 0 ? 0 : int(flight_segments) - 1;
  if (flight_segments <= 7) return 3;
  return flight_segments <= 15 ? 4 : 5;
}

// Per-direction totals. "fwd" of a flow is client->server, "rev" server->client.
struct HalfRecord {
  uint64_t bytes = 0;                // payload bytes, retransmissions included
  uint64_t unique_bytes = 0;         // payload bytes that advanced the highest sequence
  uint32_t packets = 0;              // segments, pure ACKs included
  uint32_t data_packets = 0;         // segments carrying payload
  uint32_t rexmt_packets = 0;        // retransmitted data segments (fast + timeout + other)
  uint32_t rexmt_fast = 0;           // sent during dupack/SACK recovery
  uint32_t rexmt_timeout = 0;        // sent after a retransmission timeout
  uint32_t rexmt_spurious = 0;       // shown unnecessary by a DSACK
  uint32_t dsacks = 0;               // DSACK reports for this sender (a network duplicate too)
  uint32_t reordered_packets = 0;    // arrived below the highest sequence but never sent before
  uint32_t capture_dups = 0;         // identical copies made by the capture, not by the sender
  uint32_t loss_events_fast = 0;     // loss events recovered by fast retransmit
  uint32_t loss_events_timeout = 0;  // loss events recovered by timeout
  // The same events by the flight at the loss (loss_flight_class): [0] fast, [1] timeout.
  uint16_t loss_by_flight[2][kLossFlightClasses]{};
  uint32_t timeout_wait_us = 0;  // summed over timeout events: last send to the timeout's resend
  uint32_t rtt_count = 0;
  uint32_t rtt_min_us = 0;
  uint32_t rtt_max_us = 0;
  uint64_t rtt_sum_us = 0;
  uint16_t mss = 0;       // announced MSS option, else largest segment seen
  uint8_t wscale = 0xff;  // 0xff = not announced
  bool sack_permitted = false;
  bool timestamps = false;
  uint16_t max_flight_segments = 0;
  uint8_t wc_count = 0;              // W_c samples taken (all of them)
  uint8_t wc_kept = 0;               // how many of them are stored below
  uint16_t wc_segments[6]{};         // first W_c samples, in segments
  uint8_t wc_cwnd_limited_mask = 0;  // bit i: sample i came from a cwnd-limited flight
  uint16_t md_permille = 0;          // last multiplicative decrease seen, 1000 * cwnd_after/before
  SenderKind sender = SenderKind::kUnknown;  // classify_sender (sender_id.hpp)
  uint64_t first_data_ns = 0;
  uint64_t last_data_ns = 0;
};

struct FlowRecord {
  IpAddr client;
  IpAddr server;
  uint16_t client_port = 0;
  uint16_t server_port = 0;
  uint8_t ip_version = 4;
  uint16_t vlan = 0;
  bool handshake_seen = false;  // SYN observed: roles come from the handshake
  CloseReason close = CloseReason::kEndOfCapture;
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  int64_t hs_rtt_us = -1;      // SYN to ACK of SYN-ACK as seen at the monitor; -1 = none
  int64_t syn_synack_us = -1;  // SYN to SYN-ACK leg
  int64_t synack_ack_us = -1;  // SYN-ACK to ACK leg
  HalfRecord c2s;
  HalfRecord s2c;
};

}  // namespace spand
