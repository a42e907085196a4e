// What the Redis side is configured with, as the gateway's and the replica's options give it:
// where Redis is, the sliding window and bucket, the flush cadence and the prefix scope.
// control/control_plane.hpp extends it with the service's own options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/prefix.hpp"

namespace spand {

// Sample time sanity (docs/redis-schema.md, "Time sanity"): no sample, Report or store clock may
// lie more than this beyond the wall clock (the writer's, or the Redis server's for the clock).
inline constexpr uint32_t kDefaultClockSkewS = 60;
// Bounds on one sample's value (docs/redis-schema.md): the largest window TCP can announce in
// segments, and an RTT no path has.
inline constexpr uint32_t kMaxWcSegments = 65535;
inline constexpr uint32_t kMaxRttUs = 60'000'000;

struct EstimatesOptions {
  std::string redis_url;                         // "" = no Redis; redis://[user:password@]host:port
  std::vector<std::string> redis_cluster_seeds;  // host:port of cluster nodes; non-empty = cluster
  std::string redis_password_file;               // read the password from a file instead of the URL
  std::string redis_key_prefix = "spand";        // every key's first part (redis_schema.hpp)
  // The key of client ids (first line: 32 hex digits), shared by every writer into one Redis;
  // "" = the public key (estimates/README.md, "Client ids").
  std::string client_key_file;
  uint32_t flush_interval_ms = 1000;
  uint32_t bucket_s = 10;
  uint32_t window_s = 300;
  uint32_t backlog_max_updates = 1'000'000;  // unflushed bucket updates kept while Redis is away
  uint32_t min_samples = 5;
  uint32_t min_clients = 2;  // distinct W_c client addresses needed for USE_ESTIMATE
  double max_wc_cv = 2.0;    // outlier rule: W_c stddev above this many means: SLOW_START
  uint32_t clock_skew_s = kDefaultClockSkewS;  // tolerance of timestamps beyond the wall clock
  PrefixConfig prefix;
};

}  // namespace spand
