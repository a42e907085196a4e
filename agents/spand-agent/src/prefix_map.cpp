#include "prefix_map.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "net/prefix_list.hpp"

namespace spand::agent {

bool PrefixMap::parse(std::string_view text, PrefixMap& out, std::string& error) {
  std::vector<net::PrefixLine> lines;
  if (!net::parse_prefix_list(text, lines, error)) return false;
  PrefixMap m;
  for (const net::PrefixLine& l : lines) {
    m.prefixes_.insert(l.prefix);
    std::vector<uint8_t>& lens = l.prefix.v4 ? m.v4_lens_ : m.v6_lens_;
    if (std::find(lens.begin(), lens.end(), l.prefix.len_bits) == lens.end()) {
      lens.push_back(l.prefix.len_bits);
      std::sort(lens.rbegin(), lens.rend());
    }
  }
  out = std::move(m);
  return true;
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

bool PrefixMapFile::stamp(Stamp& out) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;
  out = {(long long)st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec, (long long)st.st_size,
         (unsigned long long)st.st_ino};
  return true;
}

bool PrefixMapFile::load(std::string& error) {
  Stamp s;
  const bool have_stamp = stamp(s);
  std::ifstream in(path_);
  if (!in) {
    error = "--prefix-map: cannot read '" + path_ + "'";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto m = std::make_shared<PrefixMap>();
  std::string why;
  if (!PrefixMap::parse(text.str(), *m, why)) {
    error = "--prefix-map: " + path_ + ": " + why;
    if (have_stamp) seen_ = s;  // said once per change
    return false;
  }
  if (have_stamp) seen_ = s;
  map_ = std::move(m);
  return true;
}

bool PrefixMapFile::reload_if_changed(std::string& error) {
  Stamp s;
  if (!stamp(s) || s == seen_) return false;  // missing (being replaced) or unchanged
  if (!load(error)) return false;
  ++reloads_;
  return true;
}

}  // namespace spand::agent
