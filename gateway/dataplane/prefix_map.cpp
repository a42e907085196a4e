#include "dataplane/prefix_map.hpp"

#include <algorithm>

namespace spand {

void PrefixMap::insert(const Prefix& p, uint32_t line_no) {
  prefixes_.emplace(p, line_no);
  std::vector<uint8_t>& lens = p.net.is_v4() ? v4_lens_ : v6_lens_;
  if (std::find(lens.begin(), lens.end(), p.len) == lens.end()) {
    lens.push_back(p.len);
    std::sort(lens.rbegin(), lens.rend());
  }
}

bool PrefixMap::longest_match(const IpAddr& addr, Prefix& out, uint8_t max_len) const {
  // One hash probe per distinct length, longest first (a full BGP table has about 25 per family).
  for (uint8_t len : addr.is_v4() ? v4_lens_ : v6_lens_) {
    if (len > max_len) continue;
    const Prefix p = prefix_with_len(addr, len);
    if (prefixes_.count(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

}  // namespace spand
