// The estimate for one prefix from its window sums (DESIGN.md "Window"): what the service answers.
#pragma once

#include <cstdint>

#include "dataplane/prefix.hpp"

namespace spand {

enum class Verdict : uint8_t { kUseEstimate = 0, kSlowStart = 1 };

const char* verdict_name(Verdict v);  // "USE_ESTIMATE", "SLOW_START"

inline constexpr uint32_t kDefaultMinSamples = 5;
// Distinct client addresses behind the W_c samples needed for USE_ESTIMATE in the service
// (--min-clients): one client alone cannot set its network's window.
inline constexpr uint32_t kDefaultMinClients = 2;
// Outlier rule (--max-wc-cv): W_c samples whose standard deviation exceeds this many times their
// mean are dominated by a few extreme values (honest prefixes in pcaps/ reach 1.24; ten samples
// near 10 and one forged 5255 give 3.25): SLOW_START until the window is sound again. Only for a
// window whose W_c is the mean (some bucket without a client table): the median of per-client
// means needs no such rule, and with it one forger could switch its victim to SLOW_START.
inline constexpr double kDefaultMaxWcCv = 2.0;

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
  // The window's W_c (after decay, if on): the lower median of per-client means
  // (Accumulator::wc_client_median), so that one client, however many samples it gives, counts
  // as one; the mean when some bucket of the window was written without a client table.
  double wc_segments = 0;
  double wc_mean_segments = 0;  // mean of all W_c samples
  bool wc_is_median = false;
  uint64_t wc_clients_left_out = 0;  // W_c samples of clients beyond the table (not in the median)
  double wc_stddev = 0;              // sample standard deviation of W_c (n - 1); 0 below 2 samples
  // The window's median RTT (Accumulator::rtt_median_us, within 25 %): one forged or outlying
  // sample cannot move it as it moves the mean (ten 50 ms samples and one of 3 s: 53.6 ms
  // against a mean of 318 ms). The mean when some bucket of the window has no histogram.
  double rtt_ms = 0;
  double rtt_mean_ms = 0;  // mean RTT
  bool rtt_is_median = false;
  double min_rtt_ms = 0;    // 0 when there is no RTT sample
  double age_s = 0;         // now - newest sample (W_c or RTT); 0 when there is none
  double decay_factor = 1;  // 1 = no decay applied
  uint32_t clients = 0;     // distinct W_c clients (lower bound: Accumulator::wc_clients)
  bool outlier = false;     // the outlier rule refused the window (stddev > max_cv x mean)
  // The window's loss figures (Accumulator::loss), as summed; flows == 0: no data.
  LossFigures loss;
  double never4_pct() const {
    return loss.flows ? 100.0 * double(loss.never4) / double(loss.flows) : 0;
  }
  // % of loss events recovered by timeout; 0 without any loss event.
  double timeout_pct() const {
    const uint64_t n = loss.fast + loss.timeout;
    return n ? 100.0 * double(loss.timeout) / double(n) : 0;
  }
  Verdict verdict = Verdict::kSlowStart;
};

// W_c: the lower median of per-client means when every W_c sample of the window is in a client
// table (Accumulator::has_wc_client_median), else the mean. Fewer than `min_samples` W_c samples
// gives SLOW_START (min_samples 0 is treated as 1: an
// empty window never yields an estimate); so do W_c samples from fewer than `min_clients`
// distinct client addresses (counted by Accumulator::wc_clients; a window whose samples carry
// no client mask, written before the mask existed, is not held to it); and so does a window whose
// W_c is the mean and whose standard deviation exceeds max_wc_cv times it (0 = no outlier rule),
// checked before any decay.
Estimate compute_estimate(const Accumulator& acc, uint64_t now_ns,
                          uint32_t min_samples = kDefaultMinSamples, const DecayOptions& decay = {},
                          uint32_t min_clients = 1, double max_wc_cv = 0);

}  // namespace spand
