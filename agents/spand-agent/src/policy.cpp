#include "policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "spand.h"

namespace spand::agent {

const char* skip_reason_name(SkipReason r) {
  switch (r) {
    case SkipReason::kNone:
      return "none";
    case SkipReason::kNoEstimate:
      return "no_estimate";
    case SkipReason::kSlowStart:
      return "slow_start";
    case SkipReason::kTooFewSamples:
      return "too_few_samples";
    case SkipReason::kStale:
      return "stale";
    case SkipReason::kInvalid:
      return "invalid";
    case SkipReason::kPortDisabled:
      return "port_disabled";
    case SkipReason::kUnavailable:
      return "unavailable";
    case SkipReason::kNoGain:
      return "no_gain";
    case SkipReason::kCount:
      break;
  }
  return "unknown";
}

std::string describe(const KernelPolicy& p) {
  const std::string ssthresh =
      p.skip_slow_start
          ? std::to_string(p.ssthresh_segments ? p.ssthresh_segments : p.init_cwnd_segments)
          : "default";
  char buf[256];
  std::snprintf(buf, sizeof buf, "port=%u prefix=%s init_cwnd=%u ssthresh=%s pacing_Bps=%llu",
                p.key.port, p.key.prefix.str().c_str(), p.init_cwnd_segments, ssthresh.c_str(),
                static_cast<unsigned long long>(p.pacing_rate_bytes_per_s));
  return buf;
}

uint32_t syn_rto_ms_for(uint32_t srtt_us) {
  constexpr uint64_t kMinMs = 200, kMaxMs = 1000;
  uint64_t rto_ms = (static_cast<uint64_t>(srtt_us) * 3 + 999) / 1000;
  return static_cast<uint32_t>(std::clamp(rto_ms, kMinMs, kMaxMs));
}

uint32_t rounds_slow_start(uint64_t segments, uint32_t iw) {
  uint32_t rounds = 0;
  for (uint64_t sent = 0, w = std::max<uint32_t>(iw, 1); sent < segments; w *= 2) {
    sent += w;
    ++rounds;
  }
  return rounds;
}

uint32_t rounds_avoidance(uint64_t segments, uint32_t iw) {
  uint32_t rounds = 0;
  for (uint64_t sent = 0, w = std::max<uint32_t>(iw, 1); sent < segments; ++w) {
    sent += w;
    ++rounds;
  }
  return rounds;
}

uint32_t rounds_from(uint64_t segments, uint32_t iw, uint32_t ssthresh) {
  uint32_t rounds = 0;
  for (uint64_t sent = 0, w = std::max<uint32_t>(iw, 1); sent < segments;) {
    sent += w;
    ++rounds;
    w = w < ssthresh ? std::min<uint64_t>(2 * w, ssthresh) : w + 1;
  }
  return rounds;
}

namespace {

// WindowRule::kRounds (docs/DESIGN.md, "Rules the benefit lab chose"):
// - a transfer the kernel's initial window sends in one round is left alone;
// - the window is the transfer, capped by the largest of W_c, cwnd_opt (Eq. 4 on W_c) and the
//   path's bandwidth-delay product (measured rate x propagation RTT): W_c learned from bursty
//   senders reads low on a path whose buffer their bursts overflow, the rate does not;
// - a window that needs as many rounds as slow start from IW10 is not applied;
// - the first window is paced at the larger of the measured delivery rate and the window over
//   the propagation RTT (not the mean RTT, which includes queueing): as fast as the bottleneck
//   drains it when the rate is known, so it builds no queue and costs no time.
Decision decide_rounds(const Estimate& est, uint32_t wc, const PortConfig& port,
                       const PolicyConfig& policy, const PathInfo* path) {
  Decision d;
  const uint64_t segments = spand_segments_for_bytes(port.response_bytes, policy.mss_bytes);
  const uint32_t iw_kernel = policy.kernel_initial_cwnd;
  if (segments <= iw_kernel) return {SkipReason::kNoGain, {}};
  spand_cwnd_result r{};
  if (wc > 0 &&
      (spand_cwnd_opt(wc, segments, port.acked_per_ack, SPAND_LOSS_FREE, 1, &r) != SPAND_OK ||
       r.cwnd_opt == 0))
    return {SkipReason::kInvalid, {}};
  // Propagation RTT: the smallest RTT known (the gateway's window minimum, this host's kernel).
  double prop_rtt_us = est.min_rtt_ms > 0 ? est.min_rtt_ms * 1000.0 : est.rtt_ms * 1000.0;
  if (path && path->min_rtt_us && (prop_rtt_us < 1 || path->min_rtt_us < prop_rtt_us))
    prop_rtt_us = path->min_rtt_us;
  const uint64_t rate = path ? path->rate_bytes_per_s : 0;
  uint64_t bdp_segments = 0;
  if (rate && prop_rtt_us >= 1)
    bdp_segments = static_cast<uint64_t>(double(rate) * prop_rtt_us / 1e6 / policy.mss_bytes);
  // W_c itself, not only Eq. 4's cwnd_opt: paced, a window of W_c does not meet the loss that
  // Eq. 4 shrinks the window for (measured on the idle path: 100 KB 0.77 -> see docs/DESIGN.md).
  // Paced at the measured rate, a window larger than the BDP builds a queue only by the rate's
  // error (a window W sent at (1 + e) x the bottleneck leaves W x e / (1 + e) queued), so the
  // cap is twice the BDP then: on the paper's Scenario 1 (BDP 14 segments, W_c 12) a 30 KB
  // transfer fits one window of 21 instead of two rounds.
  const uint64_t bdp_cap = policy.pace && rate ? kPacedBdpFactor * bdp_segments : bdp_segments;
  const uint64_t cap = std::max<uint64_t>({r.cwnd_opt, wc, bdp_cap});
  uint32_t window =
      static_cast<uint32_t>(std::min<uint64_t>({segments, cap, policy.max_initial_cwnd}));
  // The host's connections toward the prefix usually send n at a time: each gets 1/n of the
  // window and of the rate (the default flows beside them included, so they keep their share;
  // the sock_ops program still shares what is left among first windows in flight at once).
  double senders = 1;
  const uint32_t alone = window;
  if (policy.share_concurrent && path && path->senders > 1) {
    senders = path->senders;
    if (!policy.share_rate_only) window = static_cast<uint32_t>(window / senders);
  }
  // Where slow start stops: the path's BDP (shared as the window is), or the window itself.
  // Default Linux has no such bound (ssthresh starts infinite), so a transfer longer than the
  // window grows no faster than the kernel's would, from a larger start; measured on the paper's
  // Scenario 3 (1 MB at a 64-segment cap: congestion avoidance from 64 needs more rounds than
  // slow start from 10, slow start from 64 up to the BDP fewer).
  const auto bdp_shared = static_cast<uint32_t>(std::min<double>(
      bdp_segments / (policy.share_rate_only ? 1 : senders), SPAND_WC_MAX_SEGMENTS));
  uint32_t ssthresh = std::max(window, bdp_shared);
  if (window <= iw_kernel ||
      rounds_from(segments, window, ssthresh) >= rounds_slow_start(segments, iw_kernel)) {
    // Rule 12: the kernel's own start (IW10, slow start), its first window paced at the measured
    // rate, each socket on its own (not divided among the first windows in flight: 0.87 of
    // default against 0.91 divided, tests/lab/benefit/RESULTS.md), and only for a handshake that
    // waited 2 ms or more in a queue, on a path whose buffer overflowed (a connection of this
    // host retransmitted) and whose queue was seen (the largest smoothed RTT over the
    // propagation RTT; a quarter of it, rule 11's standing queue, left 168 of 184 batch
    // transfers to the kernel: the bulk flow's queue at a handshake was 1-15 ms, median 9,
    // of a 43 ms buffer). Beside a bulk flow that keeps the
    // buffer full, 8 bursts of IW10 lose whole windows (then a probe timeout); paced, fewer do.
    // Into an empty buffer the burst costs nothing and pacing only delays the window (8-way
    // batches with no bulk flow: spand flows 1.05 of default, median 1.33, when always paced).
    const bool queue_known = policy.standing_queue && path && path->retransmitting > 0 &&
                             path->max_srtt_us > prop_rtt_us + 1;
    if (!(policy.share_floor_paced && policy.share_concurrent && policy.pace && senders > 1 &&
          rate && queue_known))
      return {SkipReason::kNoGain, {}};
    KernelPolicy& p = d.policy;
    p.init_cwnd_segments = iw_kernel;
    p.wc_segments = std::min(wc, policy.max_initial_cwnd);
    p.acked_per_ack = port.acked_per_ack;
    p.min_cwnd_segments = iw_kernel;
    p.pacing_rate_bytes_per_s = rate;
    p.pace_only_queued = policy.share_floor_queued_only;
    p.pace_by_rank = policy.share_floor_queued_only && policy.share_floor_rank;
    if (p.pace_by_rank && policy.share_floor_burst) p.floor_burst_segments = alone;
    p.share_floor = true;
    p.queue_room_us = static_cast<uint32_t>(path->max_srtt_us - prop_rtt_us);
    p.prop_rtt_us = static_cast<uint32_t>(prop_rtt_us);
    p.path_rate_bytes_per_s = rate;
    return d;
  }

  KernelPolicy& p = d.policy;
  p.init_cwnd_segments = window;
  p.capped = r.cwnd_opt > policy.max_initial_cwnd;
  p.skip_slow_start = policy.skip_slow_start;
  p.ca_emulate = policy.skip_slow_start && policy.ca_emulate;
  p.wc_segments = std::min(wc, policy.max_initial_cwnd);
  p.acked_per_ack = port.acked_per_ack;
  p.share_concurrent = policy.share_concurrent;
  p.share_rate_only = policy.share_concurrent && policy.share_rate_only;
  p.min_cwnd_segments = iw_kernel;
  const double srtt_us = est.rtt_ms * 1000.0;
  if (srtt_us >= 1) {
    p.srtt_us = static_cast<uint32_t>(std::min(srtt_us, 60e6));
    p.rttvar_us = p.srtt_us / 2;
    if (policy.seed_syn_rto) p.syn_rto_ms = syn_rto_ms_for(p.srtt_us);
  }
  if (policy.pace && prop_rtt_us >= 1) {
    // The measured rate when there is one: paced at the bottleneck's rate the first window
    // builds no queue whatever its size. Without a rate, the window over one propagation RTT.
    // Not the larger of the two: a window beyond the BDP (W_c from before a change of path, or
    // pulled up by spand's own transfers) then paces above the bottleneck, and the buffer
    // overflows (pathchange.toml: 21 segments at 608 KB/s into a 2 Mbit/s path with an 8-segment
    // buffer, every transfer retransmitted, 1.45 x default's time).
    const uint64_t per_rtt = spand_pacing_rate_bytes_per_s(window, policy.mss_bytes, prop_rtt_us);
    p.pacing_rate_bytes_per_s = rate ? static_cast<uint64_t>(double(rate) / senders) : per_rtt;
    if (rate && segments <= window) {
      // The kernel paces at 2 x cwnd x MSS / srtt in slow start (tcp_update_pacing_rate:
      // tcp_pacing_ss_ratio 200 % while cwnd < ssthresh / 2, else 120 %), never above
      // SO_MAX_PACING_RATE. A 21-segment window on a 400 ms path is thus paced at 91 KB/s on a
      // 5.6 MB/s bottleneck (Scenario 3's 30 KB: 593 ms against a limit of 405). The cwnd that
      // makes the kernel's own rate reach the measured one (srtt is the handshake's RTT, the
      // estimate's RTT when it is longer than the propagation RTT), within the cap; ssthresh
      // above twice it keeps the slow-start ratio. Only when the transfer fits the window: its
      // segments are all there is to send, and the first window ends when they are acked.
      const double srtt_guess_us = std::max(prop_rtt_us, est.rtt_ms * 1000.0);
      const double want =
          double(p.pacing_rate_bytes_per_s) * srtt_guess_us / 1e6 / (2.0 * policy.mss_bytes);
      const auto lever =
          static_cast<uint32_t>(std::min<double>(std::ceil(want), policy.max_initial_cwnd));
      if (lever > window) {
        p.pacing_cwnd_segments = lever;
        ssthresh = std::max(ssthresh, 2 * lever + 1);
      }
    }
  }
  if (p.skip_slow_start && ssthresh > window) p.ssthresh_segments = ssthresh;
  // Rule 11: the buffer in time is the largest queueing delay this host's connections saw (the
  // largest smoothed RTT over the propagation RTT); the sock_ops program compares the
  // handshake's RTT with it. The smallest window that still saves a round over slow start from
  // IW10 is the least a cut window may keep. Only for a transfer the window holds: a loss at
  // the end of the only flight has no later segment to reveal it, and costs a probe timeout
  // (2 x srtt) or more (two bottlenecks, 30 KB: 290-506 ms against 128-136 without loss); a
  // longer transfer's later segments reveal its losses within a round (100 KB with 64
  // segments beside the same bulk flow: 231-356 ms with 5-21 segments lost, against 380-450 ms
  // for the kernel, and 356-688 ms when rule 11 left them to it).
  // The largest queueing delay is the buffer only once the buffer overflowed: on a path where
  // no connection has retransmitted it is a lower bound (the idle path: the servers' smoothed RTTs
  // showed 7-24 ms of its 50 ms buffer), and a handshake's jitter of a few ms would read as a
  // standing queue in it.
  if (policy.standing_queue && rate && path && path->max_srtt_us > prop_rtt_us + 1 &&
      path->retransmitting > 0 && segments <= window) {
    p.queue_room_us = static_cast<uint32_t>(path->max_srtt_us - prop_rtt_us);
    p.prop_rtt_us = static_cast<uint32_t>(prop_rtt_us);
    p.path_rate_bytes_per_s = rate;
    p.min_gain_segments = window;
    for (uint32_t w = iw_kernel + 1; w < window; ++w) {
      if (rounds_from(segments, w, std::max(w, bdp_shared)) <
          rounds_slow_start(segments, iw_kernel)) {
        p.min_gain_segments = w;
        break;
      }
    }
  }
  return d;
}

}  // namespace

Decision decide(const Estimate& est, double age_now_s, const PortConfig& port,
                const PolicyConfig& policy, const std::set<std::string>& available_cc,
                const PathInfo* path) {
  Decision d;
  if (!port.enabled) return {SkipReason::kPortDisabled, {}};
  SkipReason why = SkipReason::kNone;
  if (est.verdict != Verdict::kUseEstimate) {
    why = SkipReason::kSlowStart;
  } else if (est.samples < policy.min_samples) {
    why = SkipReason::kTooFewSamples;
  } else if (!(age_now_s <= policy.max_age_s)) {
    why = SkipReason::kStale;
  } else if (!std::isfinite(est.wc_segments) || est.wc_segments < 1 || !std::isfinite(est.rtt_ms) ||
             est.rtt_ms < 0) {
    why = SkipReason::kInvalid;
  }
  if (policy.window_rule == WindowRule::kRounds) {
    // This host's own measurements of the path (rate and propagation RTT) are enough for a
    // window on their own: on a path whose buffer IW10 overflows, connections lose in slow
    // start, and the gateway's samples of that (half the window, one per connection) take as
    // long as the traffic does to reach the service's minimum; the agent need not wait.
    const bool path_ok = path && path->rate_bytes_per_s > 0 && path->min_rtt_us > 0 &&
                         path->samples >= kMinPathSamples;
    if (why != SkipReason::kNone && !path_ok) return {why, {}};
    uint32_t wc = 0;
    Estimate usable = est;
    if (why == SkipReason::kNone) {
      wc = static_cast<uint32_t>(
          std::llround(std::min(est.wc_segments, static_cast<double>(SPAND_WC_MAX_SEGMENTS))));
    } else {
      usable.rtt_ms = path->min_rtt_us / 1000.0;
      usable.min_rtt_ms = usable.rtt_ms;
    }
    d = decide_rounds(usable, wc, port, policy, path);
    if (d.skip == SkipReason::kNone && d.policy.share_floor) {
      // Rule 12's paced IW10: sent by share_floor_cc where the kernel has it.
      if (!policy.share_floor_cc.empty() && available_cc.count(policy.share_floor_cc))
        d.policy.congestion_control = policy.share_floor_cc;
      return d;
    }
    if (d.skip == SkipReason::kNone && !policy.high_bdp_cc.empty() &&
        wc >= policy.high_bdp_wc_segments && available_cc.count(policy.high_bdp_cc))
      d.policy.congestion_control = policy.high_bdp_cc;
    return d;
  }
  if (why != SkipReason::kNone) return {why, {}};

  // A mean W_c beyond 32 bits is nonsense, but the cap below makes any large value safe.
  double wc_clamped = std::min(est.wc_segments, static_cast<double>(SPAND_WC_MAX_SEGMENTS));
  auto wc = static_cast<uint32_t>(std::llround(wc_clamped));
  uint64_t transfer_segments = spand_segments_for_bytes(port.response_bytes, policy.mss_bytes);
  spand_cwnd_result r{};
  if (spand_cwnd_opt(wc, transfer_segments, port.acked_per_ack, SPAND_LOSS_FREE, 1, &r) !=
          SPAND_OK ||
      r.cwnd_opt == 0)
    return {SkipReason::kInvalid, {}};

  KernelPolicy& p = d.policy;
  p.init_cwnd_segments = std::min(r.cwnd_opt, policy.max_initial_cwnd);
  p.capped = r.cwnd_opt > policy.max_initial_cwnd;
  p.skip_slow_start = policy.skip_slow_start;
  p.ca_emulate = policy.skip_slow_start && policy.ca_emulate;
  p.wc_segments = std::min(wc, policy.max_initial_cwnd);
  p.acked_per_ack = port.acked_per_ack;
  double srtt_us = est.rtt_ms * 1000.0;
  if (srtt_us >= 1) {
    p.srtt_us = static_cast<uint32_t>(std::min(srtt_us, 60e6));
    p.rttvar_us = p.srtt_us / 2;
    if (policy.pace)
      p.pacing_rate_bytes_per_s =
          spand_pacing_rate_bytes_per_s(p.init_cwnd_segments, policy.mss_bytes, srtt_us);
    if (policy.seed_syn_rto) p.syn_rto_ms = syn_rto_ms_for(p.srtt_us);
  }
  if (!policy.high_bdp_cc.empty() && wc >= policy.high_bdp_wc_segments &&
      available_cc.count(policy.high_bdp_cc))
    p.congestion_control = policy.high_bdp_cc;
  return d;
}

}  // namespace spand::agent
