// The Redis key schema and the Lua scripts that read and write it (docs/redis.md describes both).
// Every key of one prefix carries the prefix as its hash tag, so a prefix's buckets live in one
// cluster slot and one script can read the whole window.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prefix.hpp"
#include "redis_conn.hpp"

namespace spand {

// spand:{198.51.100.0/24}:b:1700000010 -- hash of one prefix's sums over one bucket.
std::string bucket_key(const Prefix& prefix, uint64_t bucket_start_s);
// spand:{g}:act:1700000010 -- sorted set: prefix -> samples in that bucket (spandctl top).
std::string activity_key(uint64_t bucket_start_s);
// spand:{g}:clock -- newest capture time (ns, decimal) any writer has seen; a replica's "now".
inline constexpr const char* kClockKey = "spand:{g}:clock";
// Scratch key of the top script (atomic, so one fixed name is safe).
inline constexpr const char* kTopScratchKey = "spand:{g}:top:scratch";

// Bucket starts (seconds, aligned) whose buckets make up the window that ends at `now_ns`: the
// bucket holding `now` and the ones before it, ceil(window_s / bucket_s) in all. A sample older
// than window_s is never included; one up to bucket_s younger than that may already be out.
std::vector<uint64_t> window_buckets(uint64_t now_ns, uint32_t window_s, uint32_t bucket_s);

inline uint64_t bucket_start_of(uint64_t ts_ns, uint32_t bucket_s) {
  uint64_t s = ts_ns / 1'000'000'000ULL;
  return s - s % bucket_s;
}

// "198.51.100.0/24" or "2001:db8:1::/48" (as Prefix::to_string writes them) back into a Prefix;
// host bits must be zero. A bare address is not accepted here.
bool parse_cidr(std::string_view text, Prefix& out);

// Doubles as Redis and Lua read them back exactly ("%.17g").
std::string format_double(double v);

const RedisScript& write_bucket_script();
const RedisScript& read_window_script();
const RedisScript& add_activity_script();
const RedisScript& top_script();

} // namespace spand
