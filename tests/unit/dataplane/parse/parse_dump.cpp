// Test helper for scapy_vectors.py: reads one frame per line from stdin as
//   <linktype> <caplen> <wire_len> <hex bytes>
// and prints what parse_frame decoded, one line per frame, as space-separated key=value pairs.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/parse.hpp"

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void print_addr(const char* key, const spand::IpAddr& a) {
  std::printf(" %s=", key);
  for (uint8_t b : a.bytes) std::printf("%02x", b);
}

}  // namespace

int main() {
  std::string line;
  char chunk[4096];
  std::vector<uint8_t> bytes;
  while (std::fgets(chunk, sizeof chunk, stdin) != nullptr) {
    line += chunk;
    if (line.empty() || line.back() != '\n') continue;
    unsigned link = 0, caplen = 0, wire_len = 0;
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%u %u %u %n", &link, &caplen, &wire_len, &consumed) != 3) {
      std::fprintf(stderr, "parse_dump: bad line\n");
      return 2;
    }
    bytes.clear();
    for (size_t i = static_cast<size_t>(consumed); i + 1 < line.size(); i += 2) {
      const int hi = hex_value(line[i]);
      const int lo = hex_value(line[i + 1]);
      if (hi < 0 || lo < 0) break;
      bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
    }
    line.clear();
    if (caplen > bytes.size()) {
      std::fprintf(stderr, "parse_dump: caplen %u above the %zu bytes given\n", caplen,
                   bytes.size());
      return 2;
    }
    spand::ParsedPacket p;
    const spand::Drop d = spand::parse_frame(static_cast<spand::LinkType>(link), bytes.data(),
                                             caplen, wire_len, 0, p);
    std::printf("drop=%s", spand::drop_name(d));
    if (d == spand::Drop::kNone) {
      std::printf(" ipv=%u vlan_outer=%u vlan_inner=%u ip_id=%u", p.ip_version, p.vlan_outer,
                  p.vlan_inner, p.ip_id);
      print_addr("src", p.src);
      print_addr("dst", p.dst);
      std::printf(" sport=%u dport=%u seq=%u ack=%u flags=%u window=%u payload_len=%u", p.sport,
                  p.dport, p.seq, p.ack, p.flags, p.window, p.payload_len);
      std::printf(" mss=%u wscale=%u sack_permitted=%d ts=%d tsval=%u tsecr=%u malformed=%d",
                  p.opt.mss, p.opt.wscale, p.opt.sack_permitted ? 1 : 0, p.opt.has_ts ? 1 : 0,
                  p.opt.tsval, p.opt.tsecr, p.opt.malformed ? 1 : 0);
      std::printf(" sack=");
      for (int i = 0; i < p.opt.sack_count; ++i) {
        std::printf("%s%u-%u", i ? "," : "", p.opt.sack[i].left, p.opt.sack[i].right);
      }
    }
    std::printf("\n");
  }
  return 0;
}
