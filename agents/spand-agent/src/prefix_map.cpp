#include "prefix_map.hpp"

#include <algorithm>

namespace spand::agent {

bool PrefixMap::parse(std::string_view text, PrefixMap& out, std::string& error) {
  std::vector<net::PrefixLine> lines;
  if (!net::parse_prefix_list(text, lines, error)) return false;
  out = from_lines(lines);
  return true;
}

PrefixMap PrefixMap::from_lines(const std::vector<net::PrefixLine>& lines) {
  PrefixMap m;
  for (const net::PrefixLine& l : lines) {
    m.prefixes_.insert(l.prefix);
    std::vector<uint8_t>& lens = l.prefix.v4 ? m.v4_lens_ : m.v6_lens_;
    if (std::find(lens.begin(), lens.end(), l.prefix.len_bits) == lens.end()) {
      lens.push_back(l.prefix.len_bits);
      std::sort(lens.rbegin(), lens.rend());
    }
  }
  return m;
}

std::optional<Prefix> PrefixMap::longest_holding(const Prefix& given) const {
  // An IPv4-mapped address written as IPv6 is IPv4, as in the file and the service.
  Prefix p = given;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!p.v4 && p.len_bits >= 96 && std::equal(kMapped, kMapped + 12, p.addr.begin())) {
    p.v4 = true;
    p.len_bits = uint8_t(p.len_bits - 96);
  }
  // One probe per distinct length no longer than p, longest first.
  for (uint8_t len : p.v4 ? v4_lens_ : v6_lens_) {
    if (len > p.len_bits) continue;
    const Prefix q = p.truncated(len);
    if (prefixes_.count(q)) return q;
  }
  return std::nullopt;
}

bool PrefixMapFile::load(std::string& error) {
  net::FileStamp s;
  const bool have_stamp = net::stamp_file(path_, s);
  std::vector<net::PrefixLine> lines;
  const net::FileRead r = net::read_prefix_list_file(path_, "--prefix-map", lines, error);
  if (r == net::FileRead::kCannotRead) return false;
  if (have_stamp) seen_ = s;  // a file that does not parse is said once per change
  if (r != net::FileRead::kOk) return false;
  map_ = std::make_shared<PrefixMap>(PrefixMap::from_lines(lines));
  return true;
}

bool PrefixMapFile::reload_if_changed(std::string& error) {
  net::FileStamp s;
  if (!net::stamp_file(path_, s) || s == seen_)
    return false;  // missing (being replaced) or unchanged
  if (!load(error)) return false;
  ++reloads_;
  return true;
}

}  // namespace spand::agent
