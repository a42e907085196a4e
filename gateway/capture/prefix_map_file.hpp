// The prefix map file of network-aware clustering (dataplane/prefix_map.hpp): read at start, and
// read again within a second whenever it changes (modification time, size or inode: an editor's
// rename counts), with no restart. A file that no longer parses keeps the previous map in use
// and says why on stderr, once per change.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "dataplane/prefix_map.hpp"
#include "net/prefix_list.hpp"

namespace spand {

// The map file's text: one CIDR prefix per line (IPv4 or IPv6, "198.51.100.0/22",
// "2001:db8::/32"); a bare address is its host prefix; '#' starts a comment; blank lines and
// surrounding blanks are ignored. Host bits set below the length are an error (a typo more often
// than intended). False with "line N: why" in `error` (and `out` unchanged).
bool parse_prefix_map(std::string_view text, PrefixMap& out, std::string& error);

// Reads and parses `path` into `source` (replacing its map). False with the reason in `error`.
bool load_prefix_map(const std::string& path, PrefixMapSource& source, std::string& error);

class PrefixMapWatcher {
 public:
  // `program` names the lines on stderr.
  PrefixMapWatcher(std::string path, std::shared_ptr<PrefixMapSource> source,
                   std::string program = "spand-gateway");
  ~PrefixMapWatcher();  // stops the thread
  PrefixMapWatcher(const PrefixMapWatcher&) = delete;
  PrefixMapWatcher& operator=(const PrefixMapWatcher&) = delete;
  uint64_t reloads() const { return reloads_.load(); }
  // Looks at the file now; reloads if it changed. Returns true if it did (tests call it).
  bool check_now();

 private:
  std::string path_;
  std::string program_;
  std::shared_ptr<PrefixMapSource> source_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reloads_{0};
  net::FileStamp seen_;  // the file's change check is the agent's too (common/net)
  std::thread thread_;
};

}  // namespace spand
