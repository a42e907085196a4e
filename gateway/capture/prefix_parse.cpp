#include "capture/prefix_parse.hpp"

namespace spand {

bool parse_prefix(std::string_view text, Prefix& out, bool& host_bits) {
  net::IpText t;
  if (net::parse_ip_text(text, t) != net::IpTextError::kNone) return false;
  const IpAddr addr = IpAddr::from_v6(t.addr.data());  // IPv4 arrives IPv4-mapped, as IpAddr
  out = prefix_with_len(addr, uint8_t(t.len));
  host_bits = !(out.net == addr);
  return true;
}

bool parse_prefix(std::string_view text, Prefix& out, net::IpTextError* why) {
  net::IpText t;
  const net::IpTextError e = net::parse_ip_text(text, t);
  if (why) *why = e;
  if (e != net::IpTextError::kNone) return false;
  out = prefix_with_len(IpAddr::from_v6(t.addr.data()), uint8_t(t.len));
  return true;
}

}  // namespace spand
