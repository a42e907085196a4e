#include "dataplane/prefix_map.hpp"

#include <algorithm>

namespace spand {

namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

bool PrefixMap::parse(std::string_view text, PrefixMap& out, std::string& error) {
  PrefixMap m;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = trim(line);
    if (line.empty()) continue;
    Prefix p;
    if (!parse_prefix(std::string(line), p)) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' is not an IPv4 or IPv6 prefix (address/length)";
      return false;
    }
    Prefix as_written;
    const std::string addr_text(line.substr(0, line.find('/')));
    parse_prefix(addr_text, as_written);
    if (!(as_written.net == p.net)) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' has host bits set below its length (the network is " + p.to_string() + ")";
      return false;
    }
    m.prefixes_.emplace(p, uint32_t(line_no));
    std::vector<uint8_t>& lens = p.net.is_v4() ? m.v4_lens_ : m.v6_lens_;
    if (std::find(lens.begin(), lens.end(), p.len) == lens.end()) lens.push_back(p.len);
  }
  std::sort(m.v4_lens_.rbegin(), m.v4_lens_.rend());
  std::sort(m.v6_lens_.rbegin(), m.v6_lens_.rend());
  out = std::move(m);
  return true;
}

bool PrefixMap::longest_match(const IpAddr& addr, Prefix& out) const {
  // One hash probe per distinct length, longest first (a full BGP table has about 25 per family).
  for (uint8_t len : addr.is_v4() ? v4_lens_ : v6_lens_) {
    const Prefix p = prefix_with_len(addr, len);
    if (prefixes_.count(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

}  // namespace spand
