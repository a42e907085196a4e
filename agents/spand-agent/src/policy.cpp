#include "policy.hpp"

#include <algorithm>
#include <cmath>

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
    case SkipReason::kCount:
      break;
  }
  return "unknown";
}

uint32_t syn_rto_ms_for(uint32_t srtt_us) {
  constexpr uint64_t kMinMs = 200, kMaxMs = 1000;
  uint64_t rto_ms = (static_cast<uint64_t>(srtt_us) * 3 + 999) / 1000;
  return static_cast<uint32_t>(std::clamp(rto_ms, kMinMs, kMaxMs));
}

Decision decide(const Estimate& est, double age_now_s, const PortConfig& port,
                const PolicyConfig& policy, const std::set<std::string>& available_cc) {
  Decision d;
  if (!port.enabled) return {SkipReason::kPortDisabled, {}};
  if (est.verdict != Verdict::kUseEstimate) return {SkipReason::kSlowStart, {}};
  if (est.samples < policy.min_samples) return {SkipReason::kTooFewSamples, {}};
  if (!(age_now_s <= policy.max_age_s)) return {SkipReason::kStale, {}};
  if (!std::isfinite(est.wc_segments) || est.wc_segments < 1 || !std::isfinite(est.rtt_ms) ||
      est.rtt_ms < 0)
    return {SkipReason::kInvalid, {}};

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
