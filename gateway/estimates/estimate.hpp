// The estimate for one prefix from its window sums (DESIGN.md "Window"): what the service answers.
#pragma once

#include <cstdint>

#include "dataplane/prefix.hpp"

namespace spand {

enum class Verdict : uint8_t { kUseEstimate = 0, kSlowStart = 1 };

const char* verdict_name(Verdict v);  // "USE_ESTIMATE", "SLOW_START"

inline constexpr uint32_t kDefaultMinSamples = 5;

// Optional decay of W_c for a prefix gone quiet (the paper's future work). Off by default.
// With half_life_s > 0, once the newest sample is older than grace_s the mean W_c moves toward
// floor_segments: wc = floor + (mean - floor) * 2^-((age - grace) / half_life). Only a mean above
// the floor is pulled down; stddev shrinks by the same factor. The sample count and the verdict
// are unchanged: decay makes a stale estimate cautious, it does not invent samples.
struct DecayOptions {
  double half_life_s = 0;      // 0 = off
  double grace_s = 0;          // age of the newest sample before decay starts
  double floor_segments = 10;  // RFC 6928 initial window: what a cautious sender would use
};

struct Estimate {
  uint64_t samples = 0;  // W_c samples in the window
  uint64_t rtt_samples = 0;
  double wc_segments = 0;   // mean W_c (after decay, if on)
  double wc_stddev = 0;     // sample standard deviation of W_c (n - 1); 0 below 2 samples
  double rtt_ms = 0;        // mean RTT
  double min_rtt_ms = 0;    // 0 when there is no RTT sample
  double age_s = 0;         // now - newest sample (W_c or RTT); 0 when there is none
  double decay_factor = 1;  // 1 = no decay applied
  Verdict verdict = Verdict::kSlowStart;
};

// Fewer than `min_samples` W_c samples gives SLOW_START (min_samples 0 is treated as 1: an
// empty window never yields an estimate).
Estimate compute_estimate(const Accumulator& acc, uint64_t now_ns,
                          uint32_t min_samples = kDefaultMinSamples,
                          const DecayOptions& decay = {});

}  // namespace spand
