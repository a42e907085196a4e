// Addresses and prefixes as text (inet_ntop / inet_pton), for options, records and Redis keys:
// called by control code and the writers, never per packet.
#include <arpa/inet.h>

#include <string>

#include "dataplane/prefix.hpp"

namespace spand {

std::string addr_to_string(const IpAddr& a) {
  char buf[INET6_ADDRSTRLEN];
  if (a.is_v4()) {
    inet_ntop(AF_INET, a.bytes.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, a.bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::string Prefix::to_string() const {
  return addr_to_string(net) + "/" + std::to_string(len);
}

bool parse_prefix(const std::string& text, Prefix& out) {
  const size_t slash = text.find('/');
  const std::string addr_text = text.substr(0, slash);
  IpAddr a;
  bool v4 = false;
  uint8_t raw[16];
  if (inet_pton(AF_INET, addr_text.c_str(), raw) == 1) {
    a = IpAddr::from_v4(raw);
    v4 = true;
  } else if (inet_pton(AF_INET6, addr_text.c_str(), raw) == 1) {
    a = IpAddr::from_v6(raw);
  } else {
    return false;
  }
  unsigned len = v4 ? 32 : 128;
  if (slash != std::string::npos) {
    const std::string len_text = text.substr(slash + 1);
    if (len_text.empty() || len_text.size() > 3 ||
        len_text.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    len = unsigned(std::stoul(len_text));
    if (len > (v4 ? 32u : 128u)) return false;
  }
  out = prefix_with_len(a, uint8_t(len));
  return true;
}

}  // namespace spand
