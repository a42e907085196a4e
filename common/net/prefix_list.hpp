// A prefix list file's text (network-aware clustering's prefix map: a CIDR list, e.g. from a BGP
// RIB dump): one IPv4 or IPv6 prefix per line ("198.51.100.0/22", "2001:db8::/32"), a bare address
// is its host prefix, '#' starts a comment, blank lines and surrounding blanks are ignored. Host
// bits set below the length are refused (a typo more often than intended). Read by the gateway
// and spand-estimates (gateway/capture/prefix_map_file.hpp) and by the agent (its prefix_map), so
// that all three read one file the same way, and see its changes the same way (FileStamp).
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

// A file's identity now: modification time, size and inode (an editor that writes a new file
// and renames it over the old one changes the inode). Equal stamps: the file has not changed.
struct FileStamp {
  long long mtime_ns = -1;
  long long size = -1;
  unsigned long long inode = 0;
  bool operator==(const FileStamp&) const = default;
  bool known() const { return mtime_ns >= 0; }
};

// The stamp of `path`; false if it cannot be stat'ed (missing, or being replaced).
bool stamp_file(const std::string& path, FileStamp& out);

// Reads and parses the prefix list file `path`. Anything but kOk leaves `out` unchanged and gives
// the reason in `error`, prefixed by `option` ("--prefix-map: cannot read 'F'", "--prefix-map: F:
// line N: ...").
enum class FileRead { kOk, kCannotRead, kBadText };
FileRead read_prefix_list_file(const std::string& path, const std::string& option,
                               std::vector<PrefixLine>& out, std::string& error);

}  // namespace spand::net
