// A prefix list file's text (network-aware clustering's prefix map: a CIDR list, e.g. from a BGP
// RIB dump): one IPv4 or IPv6 prefix per line ("198.51.100.0/22", "2001:db8::/32"), a bare address
// is its host prefix, '#' starts a comment, blank lines and surrounding blanks are ignored. Host
// bits set below the length are refused (a typo more often than intended). Read by the gateway
// and spand-estimates (gateway/capture/prefix_map_file.hpp) and by the agent (its prefix_map), so
// that all three read one file the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/ip_prefix.hpp"

namespace spand::net {

struct PrefixLine {
  IpPrefix prefix;
  uint32_t line = 0;  // 1-based line of the file
};

// The prefixes of `text`, in file order. False with "line N: why" in `error` (`out` unchanged).
bool parse_prefix_list(std::string_view text, std::vector<PrefixLine>& out, std::string& error);

}  // namespace spand::net
