#include "service/address.hpp"

#include <arpa/inet.h>

#include <charconv>

namespace spand {
namespace {

constexpr size_t kMaxAddressChars = 64;  // longest IPv6 text with a /128 is 43 characters

bool parse_ip(const std::string& text, IpAddr& out) {
  // inet_pton reads up to the first NUL: "1.2.3.4\0evil" would pass as 1.2.3.4.
  if (text.find('\0') != std::string::npos) return false;
  uint8_t buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) {
    out = IpAddr::from_v4(buf);
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) {
    out = IpAddr::from_v6(buf);
    return true;
  }
  return false;
}

// Splits "addr[/len]"; `len` is -1 when absent.
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
  len = -1;
  std::string_view host = text;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    host = text.substr(0, slash);
    const std::string_view len_text = text.substr(slash + 1);
    unsigned value = 0;
    const auto [end, ec] =
        std::from_chars(len_text.data(), len_text.data() + len_text.size(), value);
    if (len_text.empty() || ec != std::errc() || end != len_text.data() + len_text.size() ||
        value > 255) {
      error = "prefix length '" + std::string(len_text) + "' is not a number in 0..128";
      return false;
    }
    len = int(value);
  }
  if (!parse_ip(std::string(host), addr)) {
    error = "'" + std::string(host) + "' is not an IPv4 or IPv6 address";
    return false;
  }
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
  out = prefix_of(addr, cfg);
  return true;
}

bool parse_client_address(std::string_view text, const PrefixConfig& cfg, IpAddr& out,
                          std::string& error) {
  int len = -1;
  return split(text, cfg, out, len, error);
}

}  // namespace spand
