#include "capture/prefix_map_file.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "capture/prefix_parse.hpp"

namespace spand {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

bool parse_prefix_map(std::string_view text, PrefixMap& out, std::string& error) {
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
    bool host_bits = false;
    if (!parse_prefix(line, p, host_bits)) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' is not an IPv4 or IPv6 prefix (address/length)";
      return false;
    }
    if (host_bits) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' has host bits set below its length (the network is " + p.to_string() + ")";
      return false;
    }
    m.insert(p, uint32_t(line_no));
  }
  out = std::move(m);
  return true;
}

bool load_prefix_map(const std::string& path, PrefixMapSource& source, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "--prefix-map: cannot read '" + path + "'";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto map = std::make_shared<PrefixMap>();
  std::string why;
  if (!parse_prefix_map(text.str(), *map, why)) {
    error = "--prefix-map: " + path + ": " + why;
    return false;
  }
  source.current.store(std::move(map), std::memory_order_release);
  return true;
}

PrefixMapWatcher::PrefixMapWatcher(std::string path, std::shared_ptr<PrefixMapSource> source)
    : path_(std::move(path)), source_(std::move(source)) {
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
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;  // being replaced: look again later
  const Stamp now{(long long)st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec,
                  (long long)st.st_size, (unsigned long long)st.st_ino};
  if (now == seen_) return false;
  const bool first = seen_.mtime_ns < 0;
  seen_ = now;
  if (first) return false;  // loaded by the caller at start
  std::string error;
  if (!load_prefix_map(path_, *source_, error)) {
    std::fprintf(stderr, "spand-gateway: %s; keeping the previous prefix map\n", error.c_str());
    return false;
  }
  ++reloads_;
  const auto map = source_->current.load();
  std::fprintf(stderr, "spand-gateway: prefix map %s reloaded: %zu prefixes\n", path_.c_str(),
               map->size());
  return true;
}

}  // namespace spand
