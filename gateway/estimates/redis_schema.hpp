// The Redis key schema and the Lua scripts that read and write it (README, "Redis aggregation
// (gateway/estimates/)" describes both). A prefix's whole window lives in one hash (one field per
// time bucket), so a read is a single HMGET of the window's bucket fields: no script, about the
// cost of a GET in Redis.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/prefix.hpp"
#include "estimates/redis_conn.hpp"

namespace spand {

// Every key starts with the deployment's key prefix (--redis-key-prefix, default "spand"), so that
// deployments can share one Redis or Cluster. The Cluster hash tag ({198.51.100.0/24}, {g}) comes
// after it: a prefix never changes which keys share a slot.
inline constexpr const char* kDefaultKeyPrefix = "spand";
// A key prefix is letters, digits and "_-.:" (no braces: they would move the hash tag), 1 to 64
// characters. False with `error` otherwise.
bool valid_key_prefix(std::string_view key_prefix, std::string& error);

// spand:{198.51.100.0/24}:w -- hash of one prefix's buckets: field "<bucket_start_s>" holds that
// bucket's sums packed in one string (format_bucket_value), field "w:<writer>:<bucket_start_s>"
// the writer's last applied sequence number on that bucket.
std::string window_key(const Prefix& prefix, std::string_view key_prefix = kDefaultKeyPrefix);
// The bucket's field name in window_key: its start in seconds, decimal.
inline std::string bucket_field(uint64_t bucket_start_s) {
  return std::to_string(bucket_start_s);
}

// A bucket field holds space-separated fields: wc_n wc_sum wc_sumsq rtt_n rtt_sum_us rtt_min_us
// newest_ts_ns gw_n agent_n wc_clients rtt_hist wc_table loss created_s (rtt_min_us is meaningful
// only when rtt_n > 0; wc_clients is Accumulator::wc_clients, absent in values written before
// 2026-11-23; rtt_hist is Accumulator::rtt_hist as format_rtt_hist writes it, absent before
// 2026-11-24; wc_table is Accumulator::wc_client as format_wc_table writes it, absent before
// 2026-11-24; loss is Accumulator::loss as format_loss writes it, absent before 2026-11-24;
// created_s, always the last field, is the server's wall time when the field was made, for garbage
// collection only). Readers use the first kBucketValueFields, then what is present.
inline constexpr size_t kBucketValueFields = 9;
// Accumulator::rtt_hist as "bin:count" pairs joined by ',' for the bins that hold samples, in bin
// order; "0:0" when none (a decimal first, so that readers from before the histogram still read
// the wc_clients field in front of it).
std::string format_rtt_hist(const Accumulator& acc);
// Adds such a text into acc.rtt_hist and rtt_hist_count. False (acc unchanged) on anything else.
bool add_rtt_hist(std::string_view text, Accumulator& acc);
// Accumulator::wc_client as "overflow" then ",id:count:sum" per kept client, ascending id (for
// example "0,91203:3:30,700113:1:12"; "0" with no W_c sample). overflow is wc_client_overflow.
std::string format_wc_table(const Accumulator& acc);
// Adds such a text into acc's table, wc_client_overflow and wc_client_samples; `samples` gets the
// W_c samples it covers. False (acc unchanged) on anything else: ids not ascending, more than
// kWcClientSlots clients, a count of 0, a mean above 2^32 - 1.
bool add_wc_table(std::string_view text, Accumulator& acc, uint64_t& samples);
// Accumulator::loss as "flows:never4:fast:timeout" ("0:0:0:0" with none): decimals, so that the
// field after the client table starts with a digit, as the table does.
std::string format_loss(const LossFigures& loss);
// Adds such a text into `loss`. False (loss unchanged) on anything else: not four decimals, one
// above 2^53 (the write script adds them as Lua doubles), never4 above flows.
bool add_loss(std::string_view text, LossFigures& loss);
// Adds one packed bucket value into `acc` (and the origin counts, if asked). False on a malformed
// value (acc unchanged).
bool add_bucket_value(std::string_view value, Accumulator& acc, uint64_t* gw_n = nullptr,
                      uint64_t* agent_n = nullptr);
// spand:{g}:act:1700000010 -- sorted set: prefix -> samples in that bucket (spandctl top).
std::string activity_key(uint64_t bucket_start_s, std::string_view key_prefix = kDefaultKeyPrefix);
// spand:{g}:clock -- newest capture time (ns, decimal) any writer has seen; a replica's "now".
inline constexpr const char* kClockKey = "spand:{g}:clock";
std::string clock_key(std::string_view key_prefix = kDefaultKeyPrefix);
// spand:{g}:client_key_fp -- the fingerprint of the writers' client id key (16 hex digits,
// client_key_fingerprint), set by the first writer with SET NX; a writer whose key has another
// fingerprint writes nothing (RedisStore::expect_client_key).
std::string client_key_fp_key(std::string_view key_prefix = kDefaultKeyPrefix);
// Scratch key of the top script (atomic, so one fixed name is safe).
std::string top_scratch_key(std::string_view key_prefix = kDefaultKeyPrefix);

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
const RedisScript& add_activity_script();
const RedisScript& top_script();

}  // namespace spand
