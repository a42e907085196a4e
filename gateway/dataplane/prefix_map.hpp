// Network-aware clustering (Krishnamurthy and Wang, SIGCOMM 2000; TCP/SPAND's alternative to the
// 24-bit heuristic): clients grouped by the routed prefixes that cover them, read from a CIDR list
// (e.g. a BGP RIB dump), by longest-prefix match. Control side, like prefix_text.cpp: called by
// the collector, the Redis writer and the service for each sample or query, never per packet.
// The file's text is parsed by capture/prefix_map_file.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dataplane/prefix.hpp"

namespace spand {

class PrefixMap {
 public:
  // Adds `p` (host bits already clear), remembering the line of the file it came from.
  void insert(const Prefix& p, uint32_t line_no);
  // The longest prefix that covers `addr`; false if none does.
  bool longest_match(const IpAddr& addr, Prefix& out) const {
    return longest_match(addr, out, 128);
  }
  // The same among the prefixes of at most `max_len` bits (the family's own terms): the longest
  // prefix of the map that holds all of `addr`/`max_len` (a query for a CIDR).
  bool longest_match(const IpAddr& addr, Prefix& out, uint8_t max_len) const;
  size_t size() const { return prefixes_.size(); }

 private:
  std::unordered_map<Prefix, uint32_t, PrefixHash> prefixes_;  // the line each came from
  std::vector<uint8_t> v4_lens_;  // distinct lengths present, longest first
  std::vector<uint8_t> v6_lens_;
};

// The map in use, shared by every PrefixConfig copy (collector, Redis writer, service) and
// replaced whole when the file changes: readers take the current one without a lock.
struct PrefixMapSource {
  std::atomic<std::shared_ptr<const PrefixMap>> current;
  // Lookups (one per aggregated sample, stored sample or query) whose address no prefix of the
  // map covered: they fell back to the fixed /24 or /48.
  std::atomic<uint64_t> uncovered{0};
};

}  // namespace spand
