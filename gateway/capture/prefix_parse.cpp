#include "capture/prefix_parse.hpp"

namespace spand {
namespace {

// An IPv4-mapped address is IPv4 here, whichever way it was written, and its length an IPv4
// length (as the service reads request addresses, service/address.cpp): the data plane's Prefix
// takes its family from the address (IpAddr::is_v4). "::ffff:198.51.100.0/120" is refused as out
// of range; it used to be clamped silently to a /32.
net::IpTextError to_prefix(std::string_view text, Prefix& out, IpAddr& addr) {
  net::IpText t;
  const net::IpTextError e = net::parse_ip_text(text, t);
  if (e != net::IpTextError::kNone) return e;
  addr = IpAddr::from_v6(t.addr.data());  // IPv4 arrives IPv4-mapped, as IpAddr
  const unsigned len = t.has_len ? t.len : (addr.is_v4() ? 32u : 128u);
  if (addr.is_v4() && len > 32) return net::IpTextError::kLengthOutOfRange;
  out = prefix_with_len(addr, uint8_t(len));
  return net::IpTextError::kNone;
}

}  // namespace

bool parse_prefix(std::string_view text, Prefix& out, bool& host_bits) {
  IpAddr addr;
  if (to_prefix(text, out, addr) != net::IpTextError::kNone) return false;
  host_bits = !(out.net == addr);
  return true;
}

bool parse_prefix(std::string_view text, Prefix& out, net::IpTextError* why) {
  IpAddr addr;
  const net::IpTextError e = to_prefix(text, out, addr);
  if (why) *why = e;
  return e == net::IpTextError::kNone;
}

}  // namespace spand
