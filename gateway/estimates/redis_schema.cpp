#include "redis_schema.hpp"

#include <arpa/inet.h>

#include <cstdio>

namespace spand {

std::string bucket_key(const Prefix& prefix, uint64_t bucket_start_s) {
  return "spand:{" + prefix.to_string() + "}:b:" + std::to_string(bucket_start_s);
}

std::string activity_key(uint64_t bucket_start_s) { return "spand:{g}:act:" + std::to_string(bucket_start_s); }

std::vector<uint64_t> window_buckets(uint64_t now_ns, uint32_t window_s, uint32_t bucket_s) {
  std::vector<uint64_t> out;
  if (bucket_s == 0) return out;
  uint64_t n = (uint64_t(window_s) + bucket_s - 1) / bucket_s;
  uint64_t cur = bucket_start_of(now_ns, bucket_s);
  for (uint64_t i = 0; i < n && i * bucket_s <= cur; ++i) out.push_back(cur - i * bucket_s);
  return out;
}

bool parse_cidr(std::string_view text, Prefix& out) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash + 1 >= text.size() || slash > 45) return false;
  char addr[64];
  text.substr(0, slash).copy(addr, slash);
  addr[slash] = 0;
  unsigned len = 0;
  for (char c : text.substr(slash + 1)) {
    if (c < '0' || c > '9' || len > 128) return false;
    len = len * 10 + unsigned(c - '0');
  }
  IpAddr ip;
  uint8_t raw[16];
  if (inet_pton(AF_INET, addr, raw) == 1) {
    if (len > 32) return false;
    ip = IpAddr::from_v4(raw);
  } else if (inet_pton(AF_INET6, addr, raw) == 1) {
    if (len > 128) return false;
    ip = IpAddr::from_v6(raw);
  } else {
    return false;
  }
  out = prefix_with_len(ip, uint8_t(len));
  return out.net == ip;
}

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

namespace {

RedisScript make(std::string src) {
  RedisScript s;
  s.source = std::move(src);
  s.sha1 = script_sha1(s.source);
  return s;
}

// Decimal strings of unsigned integers compare by length, then lexically; Lua's doubles would
// round nanosecond timestamps (2^53 < 1.7e18).
constexpr const char* kLuaGreater =
    "local function gt(a, b) return #a > #b or (#a == #b and a > b) end\n";

} // namespace

// KEYS[1] bucket key. ARGV: writer id, seq, wc_n, wc_sum, wc_sumsq, rtt_n, rtt_sum_us,
// rtt_min_us, newest_ts_ns, origin field ('gw_n' or 'agent_n'), origin samples, ttl_s. Returns 1
// if applied, 0 if this writer already applied an update with this or a later seq to the key (a
// retry after a lost reply), which makes retries exactly-once. One HMGET and one HSET: the sums
// are added in Lua (sample values are integers, and integer sums below 2^53 are exact in Lua's
// doubles; Redis writes Lua numbers back in shortest round-trip form), which costs less than
// one HINCRBY per field. EXPIRE only when the key is created.
const RedisScript& write_bucket_script() {
  static const RedisScript s = make(R"lua(
local k = KEYS[1]
local wf = 'w:' .. ARGV[1]
local origin = ARGV[10]
local v = redis.call('HMGET', k, wf, 'wc_n', 'wc_sum', 'wc_sumsq', 'rtt_n', 'rtt_sum_us', 'rtt_min_us', 'newest_ts_ns', origin)
if v[1] and tonumber(v[1]) >= tonumber(ARGV[2]) then return 0 end
local out = {wf, ARGV[2], origin, (tonumber(v[9]) or 0) + ARGV[11]}
local n = 4
if ARGV[3] ~= '0' then
  out[n + 1] = 'wc_n'; out[n + 2] = (tonumber(v[2]) or 0) + ARGV[3]
  out[n + 3] = 'wc_sum'; out[n + 4] = (tonumber(v[3]) or 0) + ARGV[4]
  out[n + 5] = 'wc_sumsq'; out[n + 6] = (tonumber(v[4]) or 0) + ARGV[5]
  n = n + 6
end
if ARGV[6] ~= '0' then
  out[n + 1] = 'rtt_n'; out[n + 2] = (tonumber(v[5]) or 0) + ARGV[6]
  out[n + 3] = 'rtt_sum_us'; out[n + 4] = (tonumber(v[6]) or 0) + ARGV[7]
  n = n + 4
  if not v[7] or tonumber(ARGV[8]) < tonumber(v[7]) then
    out[n + 1] = 'rtt_min_us'; out[n + 2] = ARGV[8]; n = n + 2
  end
end
local t = v[8]
local a = ARGV[9]
if not t or #a > #t or (#a == #t and a > t) then
  out[n + 1] = 'newest_ts_ns'; out[n + 2] = a; n = n + 2
end
redis.call('HSET', k, unpack(out, 1, n))
if not t then redis.call('EXPIRE', k, ARGV[12]) end
return 1
)lua");
  return s;
}

// KEYS: the window's bucket keys of one prefix. Returns the sums as strings: wc_n, wc_sum,
// wc_sumsq, rtt_n, rtt_sum_us, rtt_min_us ('' if no RTT sample), newest_ts_ns ('0' if none),
// gw_n, agent_n, buckets found.
const RedisScript& read_window_script() {
  static const RedisScript s = make(std::string(kLuaGreater) + R"lua(
local wc_n, wc_sum, wc_sumsq, rtt_n, rtt_sum, gw_n, agent_n, found = 0, 0, 0, 0, 0, 0, 0, 0
local rmin = nil
local newest = '0'
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'wc_n', 'wc_sum', 'wc_sumsq', 'rtt_n', 'rtt_sum_us',
                       'rtt_min_us', 'newest_ts_ns', 'gw_n', 'agent_n')
  if v[7] then
    found = found + 1
    wc_n = wc_n + (tonumber(v[1]) or 0)
    wc_sum = wc_sum + (tonumber(v[2]) or 0)
    wc_sumsq = wc_sumsq + (tonumber(v[3]) or 0)
    rtt_n = rtt_n + (tonumber(v[4]) or 0)
    rtt_sum = rtt_sum + (tonumber(v[5]) or 0)
    if v[6] then
      local m = tonumber(v[6])
      if not rmin or m < rmin then rmin = m end
    end
    if gt(v[7], newest) then newest = v[7] end
    gw_n = gw_n + (tonumber(v[8]) or 0)
    agent_n = agent_n + (tonumber(v[9]) or 0)
  end
end
local function f(x) return string.format('%.17g', x) end
return {f(wc_n), f(wc_sum), f(wc_sumsq), f(rtt_n), f(rtt_sum), rmin and f(rmin) or '', newest,
        f(gw_n), f(agent_n), f(found)}
)lua");
  return s;
}

// KEYS[1] activity key, KEYS[2] clock key. ARGV: ttl_s, clock_ns ('0' = leave), then pairs of
// prefix and samples. The clock only moves forward.
const RedisScript& add_activity_script() {
  static const RedisScript s = make(std::string(kLuaGreater) + R"lua(
for i = 3, #ARGV, 2 do redis.call('ZINCRBY', KEYS[1], ARGV[i + 1], ARGV[i]) end
if #ARGV > 2 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
if ARGV[2] ~= '0' then
  local c = redis.call('GET', KEYS[2])
  if not c or gt(ARGV[2], c) then redis.call('SET', KEYS[2], ARGV[2]) end
end
return 1
)lua");
  return s;
}

// KEYS: the window's activity keys, then a scratch key (same hash tag). ARGV[1]: limit.
// Returns prefix, samples, prefix, samples, ... busiest first.
const RedisScript& top_script() {
  static const RedisScript s = make(R"lua(
local n = #KEYS - 1
local tmp = KEYS[#KEYS]
local src = {}
for i = 1, n do src[i] = KEYS[i] end
redis.call('ZUNIONSTORE', tmp, n, unpack(src))
local r = redis.call('ZREVRANGE', tmp, 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
redis.call('DEL', tmp)
return r
)lua");
  return s;
}

} // namespace spand
