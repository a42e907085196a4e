// Network-aware clustering in the agent (prefix_map, --prefix-map): the same CIDR list file as
// the gateways' and spand-estimates' (syntax: common/net/prefix_list.hpp), so that a connection's
// client is keyed, asked for and installed under the longest prefix of the map that covers it,
// the prefix the service answers for. The kernel's policy map is an LPM trie: a policy for any
// prefix length applies to every address under it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "net/prefix_list.hpp"
#include "prefix.hpp"

namespace spand::agent {

class PrefixMap {
 public:
  // From the file's text; false with "line N: why" in `error`.
  static bool parse(std::string_view text, PrefixMap& out, std::string& error);
  // From the file's parsed lines (net::read_prefix_list_file).
  static PrefixMap from_lines(const std::vector<net::PrefixLine>& lines);
  // The longest prefix of the map that holds all of `p` (an address is a full-length prefix);
  // nullopt when none does.
  std::optional<Prefix> longest_holding(const Prefix& p) const;
  size_t size() const { return prefixes_.size(); }

 private:
  std::set<Prefix> prefixes_;
  std::vector<uint8_t> v4_lens_, v6_lens_;  // lengths present, longest first
};

// The file, read at start and again when it changes (net::FileStamp: modification time, size or
// inode), checked by the caller at each refresh; a file that no longer parses keeps the map in
// use. Reading and stamping are the gateway's (common/net/prefix_list.hpp).
class PrefixMapFile {
 public:
  explicit PrefixMapFile(std::string path) : path_(std::move(path)) {}
  // Reads the file now; false with the reason ("--prefix-map: FILE: line N: ...") in `error`.
  bool load(std::string& error);
  // Reads it again if it changed since the last look; true when a new map is in use. A file
  // that no longer parses: false, the reason in `error`, the map unchanged.
  bool reload_if_changed(std::string& error);
  std::shared_ptr<const PrefixMap> map() const { return map_; }
  uint64_t reloads() const { return reloads_; }

 private:
  std::string path_;
  net::FileStamp seen_;
  std::shared_ptr<const PrefixMap> map_;
  uint64_t reloads_ = 0;
};

}  // namespace spand::agent
