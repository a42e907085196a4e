#include "capture/json_line.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace spand {

void JsonLine::put(const char* p, size_t n) {
  std::memcpy(room(n), p, n);
  n_ += n;
}

namespace {

constexpr char kPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445"
    "46"
    "47484950515253545556575859606162636465666768697071727374757677787980818283848586878889909192"
    "93"
    "949596979899";

// One IPv4 octet in decimal at `out`; returns its end.
char* octet(unsigned v, char* out) {
  if (v < 10) {
    *out = char('0' + v);
    return out + 1;
  }
  if (v < 100) {
    std::memcpy(out, kPairs + 2 * v, 2);
    return out + 2;
  }
  *out = char('0' + v / 100);
  std::memcpy(out + 1, kPairs + 2 * (v % 100), 2);
  return out + 3;
}

}  // namespace

size_t JsonLine::digits(uint64_t v, char* out) {
  // Two digits per step from a table, from the end.
  size_t len = 2;
  for (uint64_t x = v / 100; x; x /= 10) ++len;
  char* p = out + len;
  while (v >= 100) {
    const uint64_t q = v / 100;
    p -= 2;
    std::memcpy(p, kPairs + 2 * (v - 100 * q), 2);
    v = q;
  }
  if (v >= 10) {
    std::memcpy(p - 2, kPairs + 2 * v, 2);
  } else {
    p[-1] = char('0' + v);
  }
  return len;
}

void JsonLine::str(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  char* p = room(2 + 6 * text.size());
  char* const start = p;
  *p++ = '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && c != '"' && c != '\\') {
      *p++ = c;
      continue;
    }
    *p++ = '\\';
    switch (c) {
      case '"':
        *p++ = '"';
        break;
      case '\\':
        *p++ = '\\';
        break;
      case '\b':
        *p++ = 'b';
        break;
      case '\f':
        *p++ = 'f';
        break;
      case '\n':
        *p++ = 'n';
        break;
      case '\r':
        *p++ = 'r';
        break;
      case '\t':
        *p++ = 't';
        break;
      default:
        std::memcpy(p, "u00", 3);
        p[3] = kHex[u >> 4];
        p[4] = kHex[u & 15];
        p += 5;
    }
  }
  *p++ = '"';
  n_ += size_t(p - start);
}

char* JsonLine::addr_text(const IpAddr& a, char* out) {
  if (a.is_v4()) {
    out = octet(a.bytes[12], out);
    for (int i = 13; i < 16; ++i) {
      *out++ = '.';
      out = octet(a.bytes[i], out);
    }
    return out;
  }
  // RFC 5952 text (the longest run of zero groups as ::) is what inet_ntop writes.
  inet_ntop(AF_INET6, a.bytes.data(), out, INET6_ADDRSTRLEN);
  return out + std::strlen(out);
}

void JsonLine::addr(const IpAddr& a) {
  char* p = room(2 + INET6_ADDRSTRLEN);
  char* const start = p;
  *p++ = '"';
  p = addr_text(a, p);
  *p++ = '"';
  n_ += size_t(p - start);
}

void JsonLine::prefix(const IpAddr& net, unsigned len) {
  char* p = room(6 + INET6_ADDRSTRLEN);
  char* const start = p;
  *p++ = '"';
  p = addr_text(net, p);
  *p++ = '/';
  p = std::to_chars(p, p + 3, len).ptr;
  *p++ = '"';
  n_ += size_t(p - start);
}

void JsonLine::thousandths(uint32_t v) {
  char* p = room(40);
  // Shortest round-trip text in fixed notation: nlohmann prints fixed notation for decimal
  // exponents from -4 to 15, which covers 0.001 .. 4294967.295.
  char* e = std::to_chars(p, p + 40, v / 1000.0, std::chars_format::fixed).ptr;
  if (!std::memchr(p, '.', size_t(e - p))) {
    std::memcpy(e, ".0", 2);
    e += 2;
  }
  n_ = size_t(e - buf_.data());
}

}  // namespace spand
