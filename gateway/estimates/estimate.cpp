#include "estimates/estimate.hpp"

#include <algorithm>
#include <cmath>

namespace spand {

const char* verdict_name(Verdict v) {
  return v == Verdict::kUseEstimate ? "USE_ESTIMATE" : "SLOW_START";
}

Estimate compute_estimate(const Accumulator& acc, uint64_t now_ns, uint32_t min_samples,
                          const DecayOptions& decay, uint32_t min_clients, double max_wc_cv) {
  Estimate e;
  e.samples = acc.wc_count;
  e.rtt_samples = acc.rtt_count;
  e.loss = acc.loss;
  if (acc.wc_count > 0) {
    double n = double(acc.wc_count);
    e.wc_mean_segments = acc.wc_sum / n;
    e.wc_is_median = acc.has_wc_client_median();
    e.wc_segments = e.wc_is_median ? acc.wc_client_median() : e.wc_mean_segments;
    e.wc_clients_left_out = acc.wc_client_overflow;
    // Sample standard deviation (n - 1), as Accumulator::wc_stddev and --prefix-summary; the
    // difference of sums can go slightly negative by rounding.
    if (acc.wc_count > 1)
      e.wc_stddev =
          std::sqrt(std::max(0.0, (acc.wc_sumsq - acc.wc_sum * acc.wc_sum / n) / (n - 1)));
  }
  if (acc.rtt_count > 0) {
    e.rtt_mean_ms = acc.rtt_sum_us / double(acc.rtt_count) / 1000.0;
    const double median_us = acc.rtt_median_us();
    e.rtt_is_median = median_us > 0;
    e.rtt_ms = e.rtt_is_median ? median_us / 1000.0 : e.rtt_mean_ms;
    e.min_rtt_ms = acc.rtt_min_us == UINT32_MAX ? 0.0 : double(acc.rtt_min_us) / 1000.0;
  }
  e.outlier = !e.wc_is_median && max_wc_cv > 0 && acc.wc_count > 1 &&
              e.wc_stddev > max_wc_cv * e.wc_mean_segments;
  if (acc.newest_ts_ns > 0 && now_ns > acc.newest_ts_ns)
    e.age_s = double(now_ns - acc.newest_ts_ns) / 1e9;
  if (decay.half_life_s > 0 && acc.wc_count > 0 && e.age_s > decay.grace_s &&
      e.wc_segments > decay.floor_segments) {
    e.decay_factor = std::exp2(-(e.age_s - decay.grace_s) / decay.half_life_s);
    e.wc_segments = decay.floor_segments + (e.wc_segments - decay.floor_segments) * e.decay_factor;
    e.wc_stddev *= e.decay_factor;
  }
  e.clients = acc.distinct_wc_clients();
  const bool enough_clients = acc.wc_clients == 0 || e.clients >= min_clients;
  e.verdict = acc.wc_count >= std::max<uint32_t>(min_samples, 1) && enough_clients && !e.outlier
                  ? Verdict::kUseEstimate
                  : Verdict::kSlowStart;
  return e;
}

}  // namespace spand
