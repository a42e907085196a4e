// What the Redis side is configured with, as the gateway's and the replica's options give it:
// where Redis is, the sliding window and bucket, the flush cadence and the prefix scope.
// control/control_plane.hpp extends it with the service's own options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/prefix.hpp"

namespace spand {

struct EstimatesOptions {
  std::string redis_url;                         // "" = no Redis; redis://[user:password@]host:port
  std::vector<std::string> redis_cluster_seeds;  // host:port of cluster nodes; non-empty = cluster
  std::string redis_password_file;               // read the password from a file instead of the URL
  uint32_t flush_interval_ms = 1000;
  uint32_t bucket_s = 10;
  uint32_t window_s = 300;
  uint32_t backlog_max_updates = 1'000'000;  // unflushed bucket updates kept while Redis is away
  uint32_t min_samples = 5;
  PrefixConfig prefix;
};

}  // namespace spand
