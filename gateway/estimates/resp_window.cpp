#include "estimates/resp_window.hpp"

#include <charconv>
#include <cstring>
#include <string_view>

#include "estimates/redis_schema.hpp"

namespace spand::resp {
namespace {

// The line at p (without its CRLF) and the position after it.
Parse line_at(const char* p, const char* end, std::string_view& line, const char*& next) {
  const void* cr = std::memchr(p, '\r', size_t(end - p));
  if (!cr) return Parse::kIncomplete;
  const char* c = static_cast<const char*>(cr);
  if (c + 1 >= end) return Parse::kIncomplete;
  if (c[1] != '\n') return Parse::kBad;
  line = std::string_view(p, size_t(c - p));
  next = c + 2;
  return Parse::kDone;
}

// Replies a window reader gets are small: an HMGET of a window's bucket fields (about 150 bytes
// each, a few dozen fields), an AUTH status, an error line. Larger claimed lengths are not a
// window read's reply (and a length near 2^63 overflowed `len + 2`, moving the read position
// outside the buffer).
constexpr long long kMaxBulkBytes = 1 << 20;
constexpr long long kMaxArrayElements = 1 << 16;

// True when [cur, end) holds `len` bytes and their CRLF; `len` is in 0..kMaxBulkBytes.
bool have(const char* cur, const char* end, long long len) {
  return end - cur >= 2 && len <= (end - cur) - 2;
}

bool parse_int(std::string_view s, long long& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Parse parse_reply(const char* p, const char* end, Reply& r, Accumulator& acc, size_t& consumed) {
  std::string_view line;
  const char* cur = nullptr;
  if (p >= end) return Parse::kIncomplete;
  if (Parse s = line_at(p, end, line, cur); s != Parse::kDone) return s;
  const char type = line.empty() ? 0 : line[0];
  line.remove_prefix(line.empty() ? 0 : 1);
  switch (type) {
    case '-':
    case '+':
      r.type = type == '-' ? Reply::Type::kError : Reply::Type::kStatus;
      r.text = line;
      consumed = size_t(cur - p);
      return Parse::kDone;
    case ':':
      r.type = Reply::Type::kOther;
      consumed = size_t(cur - p);
      return Parse::kDone;
    case '$': {
      long long len = 0;
      if (!parse_int(line, len) || len > kMaxBulkBytes) return Parse::kBad;
      if (len >= 0) {
        if (!have(cur, end, len)) return Parse::kIncomplete;
        cur += len + 2;
      }
      r.type = Reply::Type::kOther;
      consumed = size_t(cur - p);
      return Parse::kDone;
    }
    case '*': {
      long long n = 0;
      if (!parse_int(line, n) || n > kMaxArrayElements) return Parse::kBad;
      r.type = n < 0 ? Reply::Type::kOther : Reply::Type::kArray;
      acc = Accumulator{};
      for (long long i = 0; i < n; ++i) {
        std::string_view el;
        if (Parse s = line_at(cur, end, el, cur); s != Parse::kDone) return s;
        if (el.empty() || el[0] != '$') return Parse::kBad;  // HMGET answers bulk strings only
        long long len = 0;
        if (!parse_int(el.substr(1), len) || len > kMaxBulkBytes) return Parse::kBad;
        if (len < 0) continue;  // nil: no bucket
        if (!have(cur, end, len)) return Parse::kIncomplete;
        const std::string_view value(cur, size_t(len));
        if (!r.bad_value && !add_bucket_value(value, acc)) {
          r.bad_value = true;
          r.bad_text = value;
        }
        cur += len + 2;
      }
      consumed = size_t(cur - p);
      return Parse::kDone;
    }
    default:
      return Parse::kBad;
  }
}

}  // namespace spand::resp
