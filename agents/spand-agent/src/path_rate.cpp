#include "path_rate.hpp"

#include <algorithm>

namespace spand::agent {

void PathRates::observe(const Prefix& key_prefix, uint64_t rate_bytes_per_s, uint32_t min_rtt_us,
                        double now_s) {
  if (rate_bytes_per_s == 0 && min_rtt_us == 0) return;
  const int64_t idx = index_of(now_s);
  Bucket& b = paths_[key_prefix][static_cast<size_t>(idx % kBuckets)];
  if (b.index != idx) b = Bucket{idx, 0, 0, 0};
  b.rate = std::max(b.rate, rate_bytes_per_s);
  if (min_rtt_us && (b.min_rtt_us == 0 || min_rtt_us < b.min_rtt_us)) b.min_rtt_us = min_rtt_us;
  ++b.samples;
}

std::optional<PathInfo> PathRates::get(const Prefix& key_prefix, double now_s) const {
  auto it = paths_.find(key_prefix);
  if (it == paths_.end()) return std::nullopt;
  const int64_t idx = index_of(now_s);
  PathInfo info;
  for (const Bucket& b : it->second) {
    if (b.index < 0 || idx - b.index >= kBuckets) continue;  // outside the window
    info.rate_bytes_per_s = std::max(info.rate_bytes_per_s, b.rate);
    if (b.min_rtt_us && (info.min_rtt_us == 0 || b.min_rtt_us < info.min_rtt_us))
      info.min_rtt_us = b.min_rtt_us;
    info.samples += b.samples;
  }
  if (info.samples == 0) return std::nullopt;
  return info;
}

void PathRates::expire(double now_s) {
  const int64_t idx = index_of(now_s);
  std::erase_if(paths_, [&](const auto& kv) {
    return std::all_of(kv.second.begin(), kv.second.end(),
                       [&](const Bucket& b) { return b.index < 0 || idx - b.index >= kBuckets; });
  });
}

}  // namespace spand::agent
