// Addresses and prefixes as text (inet_ntop), for records and Redis keys: called by control code
// and the writers, never per packet. Parsing text is not done here (common/net/ip_prefix.hpp).
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

}  // namespace spand
