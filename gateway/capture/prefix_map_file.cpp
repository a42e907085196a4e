#include "capture/prefix_map_file.hpp"

#include <chrono>
#include <cstdio>

namespace spand {

namespace {

PrefixMap map_of(const std::vector<net::PrefixLine>& lines) {
  PrefixMap m;
  for (const net::PrefixLine& l : lines) {
    Prefix p;
    p.net = IpAddr::from_v6(l.prefix.addr.data());  // IPv4 stays IPv4-mapped, as IpAddr keeps it
    p.len = l.prefix.len_bits;
    m.insert(p, l.line);
  }
  return m;
}

}  // namespace

bool parse_prefix_map(std::string_view text, PrefixMap& out, std::string& error) {
  // The file's syntax is the agent's too (common/net/prefix_list.hpp).
  std::vector<net::PrefixLine> lines;
  if (!net::parse_prefix_list(text, lines, error)) return false;
  out = map_of(lines);
  return true;
}

bool load_prefix_map(const std::string& path, PrefixMapSource& source, std::string& error) {
  std::vector<net::PrefixLine> lines;
  if (net::read_prefix_list_file(path, "--prefix-map", lines, error) != net::FileRead::kOk)
    return false;
  source.current.store(std::make_shared<PrefixMap>(map_of(lines)), std::memory_order_release);
  return true;
}

PrefixMapWatcher::PrefixMapWatcher(std::string path, std::shared_ptr<PrefixMapSource> source,
                                   std::string program)
    : path_(std::move(path)), program_(std::move(program)), source_(std::move(source)) {
  check_now();  // the stamp of the file loaded at start (no reload counted if unchanged)
  reloads_ = 0;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      for (int i = 0; i < 10 && !stop_.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!stop_.load()) check_now();
    }
  });
}

PrefixMapWatcher::~PrefixMapWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool PrefixMapWatcher::check_now() {
  net::FileStamp now;
  if (!net::stamp_file(path_, now)) return false;  // being replaced: look again later
  if (now == seen_) return false;
  const bool first = !seen_.known();
  seen_ = now;
  if (first) return false;  // loaded by the caller at start
  std::string error;
  if (!load_prefix_map(path_, *source_, error)) {
    std::fprintf(stderr, "%s: %s; keeping the previous prefix map\n", program_.c_str(),
                 error.c_str());
    return false;
  }
  ++reloads_;
  const auto map = source_->current.load();
  std::fprintf(stderr, "%s: prefix map %s reloaded: %zu prefixes\n", program_.c_str(),
               path_.c_str(), map->size());
  return true;
}

}  // namespace spand
