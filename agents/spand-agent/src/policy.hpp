// From an estimate to what the kernel should do for one (port, prefix): cwnd_opt via libspand
// (DESIGN.md Eq. 1-4), caps, pacing rate, RTO seed. Pure: no kernel, no clock.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "config.hpp"
#include "estimate.hpp"
#include "path_rate.hpp"

namespace spand::agent {

enum class SkipReason {
  kNone = 0,
  kNoEstimate,     // the source has nothing for the prefix
  kSlowStart,      // verdict SLOW_START (or unspecified)
  kTooFewSamples,  // fewer than policy.min_samples
  kStale,          // older than policy.max_age_s
  kInvalid,        // W_c or RTT not a usable number
  kPortDisabled,   // enabled = false for the port
  kUnavailable,    // the source could not be asked
  kNoGain,         // the kernel's slow start would finish in as few rounds (WindowRule::kRounds)
  kCount
};
const char* skip_reason_name(SkipReason r);

struct PolicyKey {
  uint16_t port = 0;
  Prefix prefix;
  auto operator<=>(const PolicyKey&) const = default;
};

struct KernelPolicy {
  PolicyKey key;
  uint32_t init_cwnd_segments = 0;  // the first window: segments sent before any ACK counts
  bool skip_slow_start = false;     // ssthresh := ssthresh_segments (or init_cwnd_segments)
  // With skip_slow_start: where slow start stops (the path's BDP in segments), 0 = the first
  // window itself. Above it the window grows by slow start up to it, then one segment per round.
  uint32_t ssthresh_segments = 0;
  // The cwnd set at the start, at least init_cwnd_segments (0 = the same): the kernel paces at
  // ratio x cwnd x MSS / srtt under SO_MAX_PACING_RATE, so on a long path a small first window
  // is paced far below the measured rate unless cwnd is raised (docs/DESIGN.md, rule 3). Only
  // init_cwnd_segments count as the first window.
  uint32_t pacing_cwnd_segments = 0;
  bool ca_emulate = false;
  uint64_t pacing_rate_bytes_per_s = 0;  // 0: no pacing
  uint32_t srtt_us = 0;
  uint32_t rttvar_us = 0;
  uint32_t syn_rto_ms = 0;  // 0: kernel default
  uint32_t wc_segments = 0;
  uint32_t acked_per_ack = 1;
  std::string congestion_control;  // empty: unchanged
  bool capped = false;             // cwnd_opt was above max_initial_cwnd
  // Connections starting together toward the prefix share the window and the rate (BPF mode);
  // a share at or below min_cwnd_segments leaves slow start alone.
  bool share_concurrent = false;
  bool share_rate_only = false;  // ... the rate only, each keeping the window
  uint32_t min_cwnd_segments = 0;
  // Rule 11 (BPF mode): the buffer in time (the largest queueing delay this host's connections
  // toward the prefix saw), the propagation RTT and the rate it is read at; a handshake that
  // waited in a standing queue gets the window the rest of the buffer holds, and is left to
  // the kernel under min_gain_segments (the smallest window that saves a round). 0: off.
  uint32_t queue_room_us = 0;
  uint32_t prop_rtt_us = 0;
  uint64_t path_rate_bytes_per_s = 0;
  uint32_t min_gain_segments = 0;
  // Rule 12 (BPF mode): the kernel's own start, paced, applied only to a socket whose handshake
  // waited 2 ms or more over prop_rtt_us in a queue; else left to the kernel.
  bool pace_only_queued = false;
  // ... gated by the socket's rank among this host's first windows in flight instead (those
  // that fit the buffer's free room left to the kernel, the later ones paced one after another).
  bool pace_by_rank = false;
  // ... and the first of a batch sends the window it would get alone (not divided among the
  // host's senders) as one burst when it fits the buffer's free room (0: the kernel's IW).
  uint32_t floor_burst_segments = 0;
  bool share_floor = false;  // the policy is rule 12's (the kernel's IW10, paced)
  // When the kernel must stop applying it on its own (the core's clock, seconds; 0 = never):
  // set by AgentCore, kept by the BPF program (an agent killed with SIGKILL removes nothing).
  double expires_s = 0;

  bool operator==(const KernelPolicy&) const = default;
};

// "port=P prefix=X init_cwnd=N ssthresh=N|default pacing_Bps=N": the start of the agent's
// "applied" log line and of the dry run's "apply" line (the lab and the tests read both).
std::string describe(const KernelPolicy& p);

struct Decision {
  SkipReason skip = SkipReason::kNone;
  KernelPolicy policy;  // meaningful when skip == kNone
};

// A window paced at the measured rate may be this many times the path's BDP (rule 10).
inline constexpr uint64_t kPacedBdpFactor = 2;

// Readings of this host's connections toward a prefix before its path alone makes a window.
inline constexpr uint32_t kMinPathSamples = 3;

// `age_now_s` is the estimate's age now (its age when received plus the time since); `path` is
// what this host measured itself toward the prefix (nullptr: nothing).
Decision decide(const Estimate& est, double age_now_s, const PortConfig& port,
                const PolicyConfig& policy, const std::set<std::string>& available_cc,
                const PathInfo* path = nullptr);

// Round trips to send `segments` from an initial window `iw`: slow start (the window doubles
// each round, as Linux grows cwnd by every segment acked) or, with slow start skipped,
// congestion avoidance (one segment more each round).
uint32_t rounds_slow_start(uint64_t segments, uint32_t iw);
uint32_t rounds_avoidance(uint64_t segments, uint32_t iw);
// From `iw`, slow start up to `ssthresh` (the window doubles but stops there), then one
// segment more each round: rounds_avoidance when ssthresh <= iw.
uint32_t rounds_from(uint64_t segments, uint32_t iw, uint32_t ssthresh);

// SYN/SYN-ACK RTO from an RTT: srtt + 4 * rttvar with rttvar = srtt / 2 (RFC 6298's first
// sample), kept within [200 ms, 1 s]: never longer than the kernel's 1 s default.
uint32_t syn_rto_ms_for(uint32_t srtt_us);

}  // namespace spand::agent
