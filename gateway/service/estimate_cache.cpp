#include "service/estimate_cache.hpp"

#include <algorithm>

namespace spand {

EstimateCache::EstimateCache(uint64_t ttl_ns, size_t max_entries)
    : ttl_ns_(ttl_ns), max_per_shard_(std::max<size_t>(1, max_entries / kShards)) {}

bool EstimateCache::find(const Prefix& p, uint64_t steady_now_ns, Accumulator& out) {
  if (ttl_ns_ == 0) return false;
  Shard& s = shard_for(p);
  std::lock_guard lock(s.mu);
  const auto it = s.map.find(p);
  if (it == s.map.end() || steady_now_ns - it->second.stored_ns >= ttl_ns_) return false;
  out = it->second.acc;
  return true;
}

void EstimateCache::put(const Prefix& p, uint64_t steady_now_ns, const Accumulator& acc) {
  if (ttl_ns_ == 0) return;
  Shard& s = shard_for(p);
  std::lock_guard lock(s.mu);
  if (s.map.size() >= max_per_shard_ && !s.map.contains(p)) {
    std::erase_if(s.map,
                  [&](const auto& kv) { return steady_now_ns - kv.second.stored_ns >= ttl_ns_; });
    if (s.map.size() >= max_per_shard_) s.map.clear();
  }
  s.map.insert_or_assign(p, Entry{steady_now_ns, acc});
}

}  // namespace spand
