// A JSON Lines formatter for the record writers: appends to one buffer reused from record to
// record (no allocation per field or per record once it has grown), numbers with std::to_chars,
// addresses without inet_ntop for IPv4. Produces the bytes nlohmann::json's dump() made before
// (compact, keys in the order written, `1.0` for a whole double); tests/unit/capture checks it
// against nlohmann on every field and on every md_ratio value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "dataplane/packet.hpp"

namespace spand {

class JsonLine {
 public:
  JsonLine() { buf_.resize(4096); }
  void clear() { n_ = 0; }
  std::string_view view() const { return {buf_.data(), n_}; }
  size_t size() const { return n_; }

  // Text copied as is: punctuation and keys, e.g. lit(",\"vlan\":").
  template <size_t N>
  void lit(const char (&text)[N]) {
    std::memcpy(room(N - 1), text, N - 1);  // a constant size: a few moves, no call
    n_ += N - 1;
  }
  void raw(std::string_view text) { put(text.data(), text.size()); }
  void u64(uint64_t v) {
    if (v < 10) {  // most counters of most records
      *room(1) = char('0' + v);
      ++n_;
    } else {
      n_ += digits(v, room(20));
    }
  }
  void i64(int64_t v) {
    if (v < 0) {
      lit("-");
      u64(0 - uint64_t(v));
    } else {
      u64(uint64_t(v));
    }
  }
  void boolean(bool v) { v ? lit("true") : lit("false"); }
  void null() { lit("null"); }
  // A JSON string with the escapes nlohmann::json uses (\" \\ \b \f \n \r \t, \u00XX).
  void str(std::string_view text);
  // An address as a JSON string: dotted quad for IPv4 (stored IPv4-mapped), RFC 5952 for IPv6.
  void addr(const IpAddr& a);
  // A prefix "net/len" as a JSON string.
  void prefix(const IpAddr& net, unsigned len);
  // thousandths / 1000 as a JSON number, as nlohmann::json prints the double (shortest form that
  // reads back the same, `.0` added to a whole number).
  void thousandths(uint32_t v);

 private:
  char* room(size_t n) {
    if (n_ + n > buf_.size()) buf_.resize(2 * (n_ + n));
    return buf_.data() + n_;
  }
  void put(const char* p, size_t n);
  // Writes v >= 10 in decimal at `out`; returns the length.
  static size_t digits(uint64_t v, char* out);
  // Writes the address's text at `out` (room for 46 bytes); returns its end.
  static char* addr_text(const IpAddr& a, char* out);

  std::string buf_;
  size_t n_ = 0;
};

}  // namespace spand
