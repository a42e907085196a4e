#include "estimates/redis_schema.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "net/ip_prefix.hpp"

namespace spand {

bool valid_key_prefix(std::string_view key_prefix, std::string& error) {
  bool ok = !key_prefix.empty() && key_prefix.size() <= 64;
  for (char c : key_prefix)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '.' || c == ':');
  if (!ok)
    error = "Redis key prefix '" + std::string(key_prefix) +
            "': expected 1 to 64 letters, digits or _-.: (no braces)";
  return ok;
}

std::string window_key(const Prefix& prefix, std::string_view key_prefix) {
  return std::string(key_prefix) + ":{" + prefix.to_string() + "}:w";
}

std::string clock_key(std::string_view key_prefix) {
  return std::string(key_prefix) + ":{g}:clock";
}

std::string client_key_fp_key(std::string_view key_prefix) {
  return std::string(key_prefix) + ":{g}:client_key_fp";
}

std::string top_scratch_key(std::string_view key_prefix) {
  return std::string(key_prefix) + ":{g}:top:scratch";
}

std::string format_rtt_hist(const Accumulator& acc) {
  std::string out;
  for (uint32_t b = 0; b < kRttBins; ++b) {
    if (!acc.rtt_hist[b]) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(b) + ':' + std::to_string(acc.rtt_hist[b]);
  }
  return out.empty() ? "0:0" : out;
}

bool add_rtt_hist(std::string_view text, Accumulator& acc) {
  std::array<uint32_t, kRttBins> add{};
  uint64_t total = 0;
  size_t i = 0;
  // Whole decimals only, each bin at most once, ascending; counts summed in 64 bits and each
  // bin's new total within 32 bits.
  auto number = [&](uint64_t limit, uint64_t& v) {
    const size_t start = i;
    v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 11)
      v = v * 10 + uint64_t(text[i++] - '0');
    return i > start && v <= limit;
  };
  int64_t last = -1;
  while (true) {
    uint64_t bin = 0, n = 0;
    if (!number(kRttBins - 1, bin) || i >= text.size() || text[i++] != ':' ||
        !number(UINT32_MAX, n) || int64_t(bin) <= last)
      return false;
    if (uint64_t(acc.rtt_hist[bin]) + n > UINT32_MAX) return false;
    last = int64_t(bin);
    add[bin] = uint32_t(n);
    total += n;
    if (i == text.size()) break;
    if (text[i++] != ',') return false;
  }
  for (uint32_t b = 0; b < kRttBins; ++b) acc.rtt_hist[b] += add[b];
  acc.rtt_hist_count += total;
  return true;
}

std::string format_wc_table(const Accumulator& acc) {
  std::string out = std::to_string(acc.wc_client_overflow);
  for (uint32_t i = 0; i < acc.wc_client_n; ++i) {
    const WcClientSums& c = acc.wc_client[i];
    out += ',' + std::to_string(c.id) + ':' + std::to_string(c.count) + ':' + std::to_string(c.sum);
  }
  return out;
}

bool add_wc_table(std::string_view text, Accumulator& acc, uint64_t& samples) {
  // Counts and sums at most 2^53: the write script adds them as Lua doubles, exact below that.
  constexpr uint64_t kExact = uint64_t(1) << 53;
  const char* cur = text.data();
  const char* const end = text.data() + text.size();
  auto number = [&](uint64_t& v) {
    const auto r = std::from_chars(cur, end, v);
    if (r.ec != std::errc() || r.ptr == cur || v > kExact) return false;
    cur = r.ptr;
    return true;
  };
  auto expect = [&](char c) { return cur < end && *cur++ == c; };
  uint64_t overflow = 0;
  if (!number(overflow)) return false;
  std::array<WcClientSums, kWcClientSlots> rows{};
  uint32_t n = 0;
  uint64_t total = overflow;
  while (cur < end) {
    uint64_t id = 0, count = 0, sum = 0;
    if (n == kWcClientSlots || !expect(',') || !number(id) || !expect(':') || !number(count) ||
        !expect(':') || !number(sum))
      return false;
    if (id > UINT32_MAX || (n > 0 && id <= rows[n - 1].id) || count == 0 ||
        sum / count > UINT32_MAX)
      return false;
    rows[n++] = WcClientSums{uint32_t(id), count, sum};
    total += count;
  }
  for (uint32_t i = 0; i < n; ++i) acc.add_wc_client(rows[i].id, rows[i].count, rows[i].sum);
  acc.wc_client_overflow += overflow;
  acc.wc_client_samples += total;
  samples = total;
  return true;
}

std::string format_loss(const LossFigures& loss) {
  return std::to_string(loss.flows) + ':' + std::to_string(loss.never4) + ':' +
         std::to_string(loss.fast) + ':' + std::to_string(loss.timeout);
}

bool add_loss(std::string_view text, LossFigures& loss) {
  constexpr uint64_t kExact = uint64_t(1) << 53;
  uint64_t v[4] = {};
  const char* cur = text.data();
  const char* const end = text.data() + text.size();
  for (int i = 0; i < 4; ++i) {
    if (i > 0 && (cur == end || *cur++ != ':')) return false;
    const auto r = std::from_chars(cur, end, v[i]);
    if (r.ec != std::errc() || r.ptr == cur || v[i] > kExact) return false;
    cur = r.ptr;
  }
  if (cur != end || v[1] > v[0]) return false;
  loss.merge(LossFigures{v[0], v[1], v[2], v[3]});
  return true;
}

bool add_bucket_value(std::string_view value, Accumulator& acc, uint64_t* gw_n, uint64_t* agent_n) {
  // strtod/strtoull need a terminated string; a value is at most ~2,600 bytes (89 histogram
  // bins of "88:4294967295,", 16 clients of ",4294967295:9007199254740992:9007199254740992").
  char buf[4096];
  if (value.size() >= sizeof buf) return false;
  value.copy(buf, value.size());
  buf[value.size()] = 0;
  // Field bounds: counts (wc_n, rtt_n, gw_n, agent_n) below 2^63, rtt_min_us within 32 bits, sums
  // finite (the comparison also refuses NaN).
  static constexpr double kCount = 9.2e18;
  static constexpr double kMaxField[kBucketValueFields] = {
      kCount, DBL_MAX, DBL_MAX, kCount, DBL_MAX, double(UINT32_MAX), 0, kCount, kCount};
  double v[kBucketValueFields];
  uint64_t newest = 0;
  const char* cur = buf;
  for (size_t i = 0; i < kBucketValueFields; ++i) {
    char* end = nullptr;
    if (i == 6) {
      newest = std::strtoull(cur, &end, 10);  // nanoseconds do not fit a double exactly
      v[i] = 0;
    } else {
      v[i] = std::strtod(cur, &end);
    }
    if (end == cur) return false;
    // strtoull takes "-1" as 2^64-1: a newest time is digits only.
    if (i == 6 && std::find(cur, const_cast<const char*>(end), '-') != end) return false;
    // Sums and counts are finite and not negative; a count or the minimum RTT converts to its
    // integer type exactly (a double outside that type's range is undefined behaviour).
    if (i != 6 && !(v[i] >= 0 && v[i] <= kMaxField[i])) return false;
    cur = end;
  }
  // After the nine: [wc_clients [rtt_hist [wc_table [loss]]]] created_s. created_s is always
  // last; values written before the mask existed have only created_s, those before the histogram
  // no rtt_hist (and the window then has no RTT median: rtt_hist_count < rtt_count), those before
  // the client table none (no W_c median: wc_client_samples < wc_count), those before the loss
  // figures none (the bucket adds nothing to them). Fields after loss (a later version's) are
  // ignored.
  std::string_view rest[6];
  size_t tokens = 0;
  for (std::string_view r(cur); tokens < 6;) {
    const size_t a = r.find_first_not_of(' ');
    if (a == std::string_view::npos) break;
    const size_t b = r.find(' ', a);
    rest[tokens++] = r.substr(a, b == std::string_view::npos ? b : b - a);
    if (b == std::string_view::npos) break;
    r = r.substr(b);
  }
  Accumulator hist;
  if (tokens >= 3 && !add_rtt_hist(rest[1], hist)) return false;
  // The table covers some of this bucket's W_c samples (all of them unless a writer from before
  // the table updated the bucket: then the field is gone), never more.
  Accumulator table;
  uint64_t table_samples = 0;
  if (tokens >= 4 && (!add_wc_table(rest[2], table, table_samples) || double(table_samples) > v[0]))
    return false;
  LossFigures loss;
  if (tokens >= 5 && !add_loss(rest[3], loss)) return false;
  unsigned long long mask = 0;
  if (tokens >= 2) {
    char* end = nullptr;
    const std::string text(rest[0]);
    mask = std::strtoull(text.c_str(), &end, 10);
    if (*end || text[0] == '-' || mask > UINT32_MAX) return false;
  }
  // Valid: only now into acc.
  acc.wc_count += uint64_t(v[0]);
  acc.wc_sum += v[1];
  acc.wc_sumsq += v[2];
  if (v[3] > 0) {
    acc.rtt_count += uint64_t(v[3]);
    acc.rtt_sum_us += v[4];
    acc.rtt_min_us = std::min(acc.rtt_min_us, uint32_t(v[5]));
  }
  acc.wc_clients |= uint32_t(mask);
  if (tokens >= 3) {
    for (uint32_t b = 0; b < kRttBins; ++b)  // saturating: a window of 2^32 samples in one bin
      acc.rtt_hist[b] =
          uint32_t(std::min<uint64_t>(UINT32_MAX, uint64_t(acc.rtt_hist[b]) + hist.rtt_hist[b]));
    acc.rtt_hist_count += hist.rtt_hist_count;
  }
  if (tokens >= 4) acc.merge_wc_table(table);
  acc.loss.merge(loss);
  acc.newest_ts_ns = std::max(acc.newest_ts_ns, newest);
  if (gw_n) *gw_n += uint64_t(v[7]);
  if (agent_n) *agent_n += uint64_t(v[8]);
  return true;
}

std::string activity_key(uint64_t bucket_start_s, std::string_view key_prefix) {
  return std::string(key_prefix) + ":{g}:act:" + std::to_string(bucket_start_s);
}

std::vector<uint64_t> window_buckets(uint64_t now_ns, uint32_t window_s, uint32_t bucket_s) {
  std::vector<uint64_t> out;
  if (bucket_s == 0) return out;
  uint64_t n = (uint64_t(window_s) + bucket_s - 1) / bucket_s;
  uint64_t cur = bucket_start_of(now_ns, bucket_s);
  for (uint64_t i = 0; i < n && i * bucket_s <= cur; ++i) out.push_back(cur - i * bucket_s);
  return out;
}

bool parse_cidr(std::string_view text, Prefix& out) {
  net::IpText t;
  if (net::parse_ip_text(text, t) != net::IpTextError::kNone || !t.has_len) return false;
  const IpAddr ip = IpAddr::from_v6(t.addr.data());  // IPv4 arrives IPv4-mapped, as IpAddr
  out = prefix_with_len(ip, uint8_t(t.len));
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

}  // namespace

// KEYS[1] window key. ARGV: writer id, seq, bucket_start_s, wc_n, wc_sum, wc_sumsq, rtt_n,
// rtt_sum_us, rtt_min_us, newest_ts_ns, origin ('gw' or 'agent'), origin samples, ttl_s,
// W_c clients mask (OR-ed into the bucket's), RTT histogram (format_rtt_hist; added bin by bin),
// W_c client table (format_wc_table; merged client by client, the kWcClientSlots smallest ids
// kept, the samples of the others added to the overflow count), loss figures (format_loss; added
// figure by figure).
// Returns 1 if applied, 0 if this writer already applied an update with this or a later seq to
// the bucket (a retry after a lost reply): retries are exactly-once. One HMGET and one HSET; the
// sums are added in Lua (sample values are integers, and integer sums below 2^53 are exact in
// doubles, written back with %.17g). A bucket field ends with its creation time (server TIME,
// seconds); when a bucket field is created, the fields created ttl_s or more wall seconds ago are
// deleted with their writer fields: the per-bucket key TTL of the old schema, done by hand
// (HGETALL of about 2 * buckets-per-window fields, once per prefix per bucket). Which buckets
// count is still decided by capture time, by the reader. EXPIRE ttl_s on each write.
const RedisScript& write_bucket_script() {
  static const RedisScript s = make("local last_bin = " + std::to_string(kRttBins - 1) + "\n" +
                                    "local slots = " + std::to_string(kWcClientSlots) + "\n" +
                                    R"lua(
local k = KEYS[1]
local b = ARGV[3]
local wf = 'w:' .. ARGV[1] .. ':' .. b
local v = redis.call('HMGET', k, wf, b)
if v[1] and tonumber(v[1]) >= tonumber(ARGV[2]) then return 0 end
local ttl = tonumber(ARGV[13])
local f = {0, 0, 0, 0, 0, 0, '0', 0, 0}
local created = nil
local mask = 0
local hist = {}
local clients = {}
local over = 0
local loss = {0, 0, 0, 0}
-- A client table (format_wc_table) into clients (id -> {count, sum}) and over.
local function take(text)
  over = over + tonumber(string.match(text, '^(%d+)'))
  for id, n, s in string.gmatch(text, ',(%d+):(%d+):(%d+)') do
    id = tonumber(id)
    local c = clients[id]
    if c then c[1] = c[1] + tonumber(n); c[2] = c[2] + tonumber(s)
    else clients[id] = {tonumber(n), tonumber(s)} end
  end
end
local now = nil
if v[2] then
  local i = 1
  for x in string.gmatch(v[2], '%S+') do f[i] = x; i = i + 1 end
  -- created_s is always the last field; the W_c clients mask (field 10) exists since 2026-11-23
  created = f[i - 1]
  if i - 1 >= 11 then mask = tonumber(f[10]) end
  -- the RTT histogram (field 11) exists since 2026-11-24
  if i - 1 >= 12 then
    for x, n in string.gmatch(f[11], '(%d+):(%d+)') do hist[tonumber(x)] = tonumber(n) end
  end
  -- the W_c client table (field 12) exists since 2026-11-24
  if i - 1 >= 13 then take(f[12]) end
  -- the loss figures (field 13) exist since 2026-11-24
  if i - 1 >= 14 then
    local a, b2, c, d = string.match(f[13], '^(%d+):(%d+):(%d+):(%d+)$')
    if a then loss = {tonumber(a), tonumber(b2), tonumber(c), tonumber(d)} end
  end
else
  now = tonumber(redis.call('TIME')[1])
  created = now
end
mask = bit.bor(mask, tonumber(ARGV[14]))
if mask < 0 then mask = mask + 4294967296 end
for x, n in string.gmatch(ARGV[15], '(%d+):(%d+)') do
  x = tonumber(x)
  hist[x] = (hist[x] or 0) + tonumber(n)
end
local parts = {}
for x = 0, last_bin do
  if hist[x] and hist[x] > 0 then parts[#parts + 1] = x .. ':' .. string.format('%d', hist[x]) end
end
local h = '0:0'
if #parts > 0 then h = table.concat(parts, ',') end
take(ARGV[16])
local ids = {}
for id in pairs(clients) do ids[#ids + 1] = id end
table.sort(ids)
local rows = {}
for j, id in ipairs(ids) do
  local c = clients[id]
  if j <= slots then rows[#rows + 1] = string.format(',%d:%d:%d', id, c[1], c[2])
  else over = over + c[1] end
end
local tbl = string.format('%d', over) .. table.concat(rows)
local lp = {}
local j = 1
for x in string.gmatch(ARGV[17], '%d+') do
  if j <= 4 then lp[j] = string.format('%d', loss[j] + tonumber(x)) end
  j = j + 1
end
for x = j, 4 do lp[x] = string.format('%d', loss[x]) end
local ls = table.concat(lp, ':')
local function g(x) return string.format('%.17g', x) end
local wc_n = tonumber(f[1]) + ARGV[4]
local wc_sum = tonumber(f[2]) + ARGV[5]
local wc_sumsq = tonumber(f[3]) + ARGV[6]
local old_rtt_n = tonumber(f[4])
local rtt_n = old_rtt_n + ARGV[7]
local rtt_sum = tonumber(f[5]) + ARGV[8]
local rtt_min = tonumber(f[6])
if ARGV[7] ~= '0' and (old_rtt_n == 0 or tonumber(ARGV[9]) < rtt_min) then rtt_min = tonumber(ARGV[9]) end
local t = f[7]
local a = ARGV[10]
if #a > #t or (#a == #t and a > t) then t = a end
local gw_n, agent_n = tonumber(f[8]), tonumber(f[9])
if ARGV[11] == 'agent' then agent_n = agent_n + ARGV[12] else gw_n = gw_n + ARGV[12] end
redis.call('HSET', k, wf, ARGV[2], b, g(wc_n) .. ' ' .. g(wc_sum) .. ' ' .. g(wc_sumsq) .. ' ' ..
           g(rtt_n) .. ' ' .. g(rtt_sum) .. ' ' .. g(rtt_min) .. ' ' .. t .. ' ' .. g(gw_n) .. ' ' ..
           g(agent_n) .. ' ' .. g(mask) .. ' ' .. h .. ' ' .. tbl .. ' ' .. ls .. ' ' ..
           g(tonumber(created)))
if now then
  local all = redis.call('HGETALL', k)
  local live = {}
  local old = {}
  for i = 1, #all, 2 do
    local name = all[i]
    if string.find(name, '^%d+$') then
      local created = tonumber(string.match(all[i + 1], '(%d+)$'))
      if created and now - created >= ttl then old[#old + 1] = name else live[name] = true end
    end
  end
  for i = 1, #all, 2 do
    local name = all[i]
    local wb = string.match(name, '^w:.*:(%d+)$')
    if wb and not live[wb] then old[#old + 1] = name end
  end
  if #old > 0 then redis.call('HDEL', k, unpack(old)) end
end
redis.call('EXPIRE', k, ttl)
return 1
)lua");
  return s;
}

// KEYS[1] activity key, KEYS[2] clock key. ARGV: ttl_s, clock_ns ('0' = leave), max_skew_s, then
// pairs of prefix and samples. The clock only moves forward, and never beyond the Redis server's
// wall time (TIME) + max_skew_s: a larger clock_ns is clamped to that limit, and a stored clock
// already beyond it (poisoned, e.g. by a forged sample of an older version) is replaced.
// Returns 1 + 2 if the clock was clamped + 4 if a poisoned clock was replaced.
const RedisScript& add_activity_script() {
  static const RedisScript s = make(std::string(kLuaGreater) + R"lua(
for i = 4, #ARGV, 2 do redis.call('ZINCRBY', KEYS[1], ARGV[i + 1], ARGV[i]) end
if #ARGV > 3 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local r = 1
local t = redis.call('TIME')
local limit = tostring(tonumber(t[1]) + tonumber(ARGV[3])) .. '000000000'
local c = redis.call('GET', KEYS[2])
if c and gt(c, limit) then
  c = nil
  r = r + 4
  if ARGV[2] == '0' then redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])) .. '000') end
end
if ARGV[2] ~= '0' then
  local v = ARGV[2]
  if gt(v, limit) then v = limit; r = r + 2 end
  if not c or gt(v, c) then redis.call('SET', KEYS[2], v) end
end
return r
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

}  // namespace spand
