// The boundary between the estimate service and the shared state in Redis. The Redis
// implementation (redis_store.*) lives beside this file; tests may drive the service with a fake.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/prefix.hpp"
#include "dataplane/sample.hpp"

namespace spand {

// Time the estimate side reasons in. The gateway advances it from packet timestamps (a replay
// gives the same answer every time); a stateless replica uses the newest time Redis has seen.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const = 0;
};

struct WindowOptions {
  uint32_t window_s = 300;           // S, the sliding window
  uint32_t bucket_s = 10;            // width of one time bucket
  std::string key_prefix = "spand";  // first part of every Redis key (redis_schema.hpp)
};

// One prefix's sums over a time bucket, ready to be added into Redis.
struct BucketUpdate {
  Prefix prefix;
  uint64_t bucket_start_s = 0;  // capture time, seconds, aligned to bucket_s
  Accumulator acc;
  SampleOrigin origin = SampleOrigin::kGateway;
};

// One prefix's window read, for batched reads (each with its own "now"): window_reader.hpp.
struct WindowRead {
  Prefix prefix;
  uint64_t now_ns = 0;
  Accumulator acc;    // out
  bool ok = false;    // out
  std::string error;  // out, when !ok
};

struct PrefixActivity {
  Prefix prefix;
  uint64_t samples = 0;
};

class EstimateStore {
 public:
  virtual ~EstimateStore() = default;
  // Adds many bucket updates; one pipelined round trip per Redis node. False + message on error
  // (the caller keeps the updates in its bounded backlog and retries).
  virtual bool write(const std::vector<BucketUpdate>& updates, std::string& error) = 0;
  // Sums every bucket of `prefix` inside (now - window, now]; one round trip.
  virtual bool read_window(const Prefix& prefix, uint64_t now_ns, Accumulator& out,
                           std::string& error) = 0;
  // The busiest prefixes in the window (spandctl top).
  virtual bool top_prefixes(uint64_t now_ns, size_t limit, std::vector<PrefixActivity>& out,
                            std::string& error) = 0;
};

}  // namespace spand
