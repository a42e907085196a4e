#include "service/address.hpp"

#include "dataplane/prefix_map.hpp"
#include "net/ip_prefix.hpp"

namespace spand {
namespace {

constexpr size_t kMaxAddressChars = 64;  // longest IPv6 text with a /128 is 43 characters

// Parses "addr[/len]" (net::parse_ip_text); `len` is -1 when absent.
bool split(std::string_view text, const PrefixConfig& cfg, IpAddr& addr, int& len,
           std::string& error) {
  if (text.empty()) {
    error = "address is empty";
    return false;
  }
  if (text.size() > kMaxAddressChars) {
    error = "address is too long";
    return false;
  }
  net::IpText t;
  const net::IpTextError why = net::parse_ip_text(text, t);
  // Above 255 a length has been called "not a number" since the service began (a uint8_t-sized
  // check before the address was read); kept so that clients see the same messages.
  if (why == net::IpTextError::kBadLength || (t.has_len && t.len > 255)) {
    error = "prefix length '" + std::string(t.len_text) + "' is not a number in 0..128";
    return false;
  }
  if (why == net::IpTextError::kBadAddress) {
    error = "'" + std::string(t.addr_text) + "' is not an IPv4 or IPv6 address";
    return false;
  }
  addr = IpAddr::from_v6(t.addr.data());  // IPv4 comes IPv4-mapped, as IpAddr keeps it
  len = t.has_len ? int(t.len) : -1;
  // An IPv4-mapped address is IPv4 here (its store prefix is the IPv4 one), whichever way it was
  // written: its length is an IPv4 length.
  const bool v4 = addr.is_v4();
  const int max_len = v4 ? 32 : 128;
  const int store_len = v4 ? cfg.v4_len : cfg.v6_len;
  if (len > max_len) {
    error = "prefix length /" + std::to_string(len) + " is out of range for " +
            (v4 ? "IPv4 (0..32)" : "IPv6 (0..128)");
    return false;
  }
  // With a prefix map the store's prefixes have many lengths: the query's network address is
  // mapped like any client's (prefix_of).
  if (len >= 0 && len < store_len && !cfg.map) {
    error = "prefix length /" + std::to_string(len) + " is wider than the store's /" +
            std::to_string(store_len) + " (estimates are kept per /" + std::to_string(store_len) +
            ")";
    return false;
  }
  return true;
}

}  // namespace

bool parse_target(std::string_view text, const PrefixConfig& cfg, Prefix& out, std::string& error) {
  IpAddr addr;
  int len = -1;
  if (!split(text, cfg, addr, len, error)) return false;
  // With a map, a CIDR answers the longest prefix of the map that holds all of it: the agent
  // asks for the map's own prefixes, and a longer one of the map covering only the CIDR's
  // network address must not answer for it.
  if (cfg.map && len >= 0) {
    const std::shared_ptr<const PrefixMap> m = cfg.map->current.load(std::memory_order_acquire);
    if (m && m->longest_match(addr, out, uint8_t(len))) return true;
  }
  out = prefix_of(addr, cfg);
  return true;
}

bool parse_client_address(std::string_view text, const PrefixConfig& cfg, IpAddr& out,
                          std::string& error) {
  int len = -1;
  return split(text, cfg, out, len, error);
}

}  // namespace spand
