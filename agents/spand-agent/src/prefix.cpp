#include "prefix.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace spand::agent {

std::optional<Prefix> Prefix::parse(std::string_view text) {
  std::string addr_text(text.substr(0, text.find('/')));
  Prefix p;
  in_addr a4{};
  in6_addr a6{};
  unsigned max_len = 0;
  if (inet_pton(AF_INET, addr_text.c_str(), &a4) == 1) {
    p.v4 = true;
    p.addr[10] = 0xff;
    p.addr[11] = 0xff;
    std::memcpy(&p.addr[12], &a4, 4);
    max_len = 32;
  } else if (inet_pton(AF_INET6, addr_text.c_str(), &a6) == 1) {
    p.v4 = false;
    std::memcpy(p.addr.data(), &a6, 16);
    max_len = 128;
  } else {
    return std::nullopt;
  }
  unsigned len = max_len;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    auto digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), len);
    if (ec != std::errc{} || end != digits.data() + digits.size() || len > max_len)
      return std::nullopt;
  }
  return p.truncated(static_cast<uint8_t>(len));
}

Prefix Prefix::truncated(uint8_t len) const {
  Prefix out = *this;
  out.len_bits = len;
  unsigned keep = v4 ? len + 96u : len;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned bit0 = i * 8;
    if (bit0 >= keep) {
      out.addr[i] = 0;
    } else if (bit0 + 8 > keep) {
      out.addr[i] &= static_cast<uint8_t>(0xff00u >> (keep - bit0));
    }
  }
  return out;
}

std::string Prefix::addr_str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4)
    inet_ntop(AF_INET, &addr[12], buf, sizeof(buf));
  else
    inet_ntop(AF_INET6, addr.data(), buf, sizeof(buf));
  return buf;
}

std::string Prefix::str() const {
  return addr_str() + "/" + std::to_string(len_bits);
}

}  // namespace spand::agent
