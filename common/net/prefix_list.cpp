#include "net/prefix_list.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace spand::net {
namespace {

bool is_v4_mapped(const std::array<uint8_t, 16>& a) {
  for (int i = 0; i < 10; ++i)
    if (a[i] != 0) return false;
  return a[10] == 0xff && a[11] == 0xff;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

bool parse_prefix_list(std::string_view text, std::vector<PrefixLine>& out, std::string& error) {
  std::vector<PrefixLine> lines;
  uint32_t line_no = 0;
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
    IpText t;
    bool ok = parse_ip_text(line, t) == IpTextError::kNone;
    // An IPv4-mapped address is IPv4 whichever way it was written, with an IPv4 length (as the
    // gateway's --inside and the service's requests read it): "::ffff:198.51.100.0/120" is
    // refused as out of range.
    const bool v4 = t.v4 || is_v4_mapped(t.addr);
    const unsigned len = t.has_len ? t.len : (v4 ? 32u : 128u);
    if (ok && v4 && len > 32) ok = false;
    if (!ok) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' is not an IPv4 or IPv6 prefix (address/length)";
      return false;
    }
    IpPrefix raw;
    raw.addr = t.addr;
    raw.v4 = v4;
    const IpPrefix p = raw.truncated(uint8_t(len));
    if (p.addr != t.addr) {
      error = "line " + std::to_string(line_no) + ": '" + std::string(line) +
              "' has host bits set below its length (the network is " + p.str() + ")";
      return false;
    }
    lines.push_back({p, line_no});
  }
  out = std::move(lines);
  return true;
}

bool stamp_file(const std::string& path, FileStamp& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  out = {(long long)st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec, (long long)st.st_size,
         (unsigned long long)st.st_ino};
  return true;
}

FileRead read_prefix_list_file(const std::string& path, const std::string& option,
                               std::vector<PrefixLine>& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = option + ": cannot read '" + path + "'";
    return FileRead::kCannotRead;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string why;
  if (!parse_prefix_list(text.str(), out, why)) {
    error = option + ": " + path + ": " + why;
    return FileRead::kBadText;
  }
  return FileRead::kOk;
}

}  // namespace spand::net
