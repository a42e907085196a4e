// A short-lived cache of window sums per prefix, so a replica answering many agents does not
// hit Redis for every request about the same busy network. Thread-safe; bounded.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "dataplane/prefix.hpp"

namespace spand {

class EstimateCache {
 public:
  // ttl_ns = 0 disables the cache. At most max_entries prefixes are kept: a full shard first
  // drops its expired entries, then, if still full, is emptied (cheap, and a cache miss only
  // costs one Redis round trip).
  EstimateCache(uint64_t ttl_ns, size_t max_entries);

  // Looks up `p` as read at a steady time within ttl of `steady_now_ns`.
  bool find(const Prefix& p, uint64_t steady_now_ns, Accumulator& out);
  void put(const Prefix& p, uint64_t steady_now_ns, const Accumulator& acc);
  bool enabled() const { return ttl_ns_ != 0; }

 private:
  static constexpr size_t kShards = 16;  // lock striping for the gRPC thread pool
  struct Entry {
    uint64_t stored_ns;
    Accumulator acc;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<Prefix, Entry, PrefixHash> map;
  };
  Shard& shard_for(const Prefix& p) { return shards_[PrefixHash{}(p) % kShards]; }

  uint64_t ttl_ns_;
  size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace spand
