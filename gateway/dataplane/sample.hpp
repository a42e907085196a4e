// One measurement handed from a data lcore to the aggregation side: a W_c or an RTT sample,
// keyed by the client-side network of the connection. Plain data: it crosses rings by value.
#pragma once

#include <cstdint>

#include "dataplane/packet.hpp"
#include "dataplane/sender_id.hpp"

namespace spand {

// kNewConnection carries no value: it tells the control side a client opened a connection.
// kDecrease is the multiplicative decrease measured after one loss (--samples-out only: it is
// not aggregated).
enum class SampleKind : uint8_t { kWc = 0, kRtt = 1, kNewConnection = 2, kDecrease = 3 };
// The kinds the per-prefix aggregation (the prefix summary and the Redis writer) takes.
inline bool is_aggregated(SampleKind k) {
  return k == SampleKind::kWc || k == SampleKind::kRtt;
}

// Why a W_c sample was taken (DESIGN.md, "W_c sample").
enum class WcReason : uint8_t {
  kNone = 0,
  kLossInCongestionAvoidance = 1,  // cwnd at loss minus one segment
  kEndOfConnection = 2,            // cwnd when the connection ended without loss
  kLossInSlowStart = 3             // half the cwnd at a first loss in slow start: a lower bound
};

// Where an RTT sample came from.
enum class RttSource : uint8_t {
  kNone = 0,
  // SYN to the ACK of the SYN-ACK at the monitor: both legs (SYN to SYN-ACK, SYN-ACK to ACK),
  // so one full round trip wherever the monitor sits. The legs are in the flow record.
  kHandshake = 1,
  kDataToAck = 2,  // Karn: data segment not retransmitted to the ACK covering it
  kTimestamp = 3   // TSval first seen to the TSecr echoing it
};

// Who produced the sample: the gateway from capture, or an agent from TCP_INFO.
enum class SampleOrigin : uint8_t { kGateway = 0, kAgent = 1 };

struct Sample {
  uint64_t ts_ns = 0;  // capture time of the packet that produced it
  IpAddr client;       // the remote (client-side) address; prefix is derived from it
  IpAddr server;       // the data sender side (for --samples-out only)
  uint16_t client_port = 0;
  uint16_t server_port = 0;
  SampleKind kind = SampleKind::kRtt;
  SampleOrigin origin = SampleOrigin::kGateway;
  WcReason wc_reason = WcReason::kNone;
  RttSource rtt_source = RttSource::kNone;
  bool cwnd_limited = false;  // W_c: the flight filled cwnd (else a lower bound, app-limited)
  // W_c: the sender's flavour from its losses so far, the one that took the sample included
  // (classify_sender, sender_id.hpp); unknown for the end-of-connection sample (no loss).
  SenderKind sender = SenderKind::kUnknown;
  uint32_t value = 0;  // W_c in segments, RTT in microseconds, decrease in thousandths
};

const char* wc_reason_name(WcReason r);
const char* rtt_source_name(RttSource s);

}  // namespace spand
