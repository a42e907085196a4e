#include "net/ip_prefix.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace spand::net {

IpTextError parse_ip_text(std::string_view text, IpText& out) {
  out = IpText{};
  const size_t slash = text.find('/');
  out.addr_text = text.substr(0, slash);
  if (slash != std::string_view::npos) {
    out.has_len = true;
    out.len_text = text.substr(slash + 1);
    // At most three digits: "/0024" or "/+24" is a typo more likely than a length.
    if (out.len_text.empty() || out.len_text.size() > 3) return IpTextError::kBadLength;
    for (char c : out.len_text) {
      if (c < '0' || c > '9') return IpTextError::kBadLength;
      out.len = out.len * 10 + unsigned(c - '0');
    }
  }
  // inet_pton reads a C string: a NUL would cut the text short ("1.2.3.4\0evil" read as
  // 1.2.3.4), and nothing longer than INET6_ADDRSTRLEN is an address.
  char buf[INET6_ADDRSTRLEN];
  if (out.addr_text.size() >= sizeof buf || out.addr_text.find('\0') != std::string_view::npos)
    return IpTextError::kBadAddress;
  out.addr_text.copy(buf, out.addr_text.size());
  buf[out.addr_text.size()] = '\0';
  uint8_t raw[16];
  if (inet_pton(AF_INET, buf, raw) == 1) {
    out.v4 = true;
    out.addr[10] = 0xff;
    out.addr[11] = 0xff;
    std::memcpy(out.addr.data() + 12, raw, 4);
  } else if (inet_pton(AF_INET6, buf, raw) == 1) {
    std::memcpy(out.addr.data(), raw, 16);
  } else {
    return IpTextError::kBadAddress;
  }
  const unsigned max_len = out.v4 ? 32 : 128;
  if (!out.has_len) out.len = max_len;
  return out.len > max_len ? IpTextError::kLengthOutOfRange : IpTextError::kNone;
}

std::string format_ip(const std::array<uint8_t, 16>& addr, bool v4) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4) {
    inet_ntop(AF_INET, addr.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
  }
  return buf;
}

std::optional<IpPrefix> IpPrefix::parse(std::string_view text) {
  IpText t;
  if (parse_ip_text(text, t) != IpTextError::kNone) return std::nullopt;
  IpPrefix p;
  p.addr = t.addr;
  p.v4 = t.v4;
  return p.truncated(uint8_t(t.len));
}

IpPrefix IpPrefix::truncated(uint8_t len) const {
  IpPrefix out = *this;
  out.len_bits = len;
  const unsigned keep = v4 ? len + 96u : len;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned bit0 = i * 8;
    if (bit0 >= keep) {
      out.addr[i] = 0;
    } else if (bit0 + 8 > keep) {
      out.addr[i] &= uint8_t(0xff00u >> (keep - bit0));
    }
  }
  return out;
}

std::string IpPrefix::addr_str() const {
  return format_ip(addr, v4);
}

std::string IpPrefix::str() const {
  return addr_str() + "/" + std::to_string(len_bits);
}

}  // namespace spand::net
