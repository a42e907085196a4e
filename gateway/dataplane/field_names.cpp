// Stable names of enums: JSON fields, summary lines and metric labels use these.
#include "dataplane/flow_record.hpp"
#include "dataplane/sample.hpp"

namespace spand {

const char* sender_kind_name(SenderKind k) {
  switch (k) {
    case SenderKind::kUnknown:
      return "unknown";
    case SenderKind::kRenoLike:
      return "reno";
    case SenderKind::kCubic:
      return "cubic";
    case SenderKind::kScalable:
      return "scalable";
    case SenderKind::kBbr:
      return "bbr";
  }
  return "unknown";
}

const char* close_reason_name(CloseReason r) {
  switch (r) {
    case CloseReason::kFin:
      return "fin";
    case CloseReason::kRst:
      return "rst";
    case CloseReason::kTimeout:
      return "timeout";
    case CloseReason::kEndOfCapture:
      return "end_of_capture";
    case CloseReason::kEvicted:
      return "evicted";
  }
  return "unknown";
}

const char* wc_reason_name(WcReason r) {
  switch (r) {
    case WcReason::kNone:
      return "none";
    case WcReason::kLossInCongestionAvoidance:
      return "loss_in_ca";
    case WcReason::kEndOfConnection:
      return "end_of_connection";
    case WcReason::kLossInSlowStart:
      return "loss_in_slow_start";
  }
  return "unknown";
}

const char* rtt_source_name(RttSource s) {
  switch (s) {
    case RttSource::kNone:
      return "none";
    case RttSource::kHandshake:
      return "handshake";
    case RttSource::kDataToAck:
      return "data_ack";
    case RttSource::kTimestamp:
      return "timestamp";
  }
  return "unknown";
}

}  // namespace spand
