// Robustness: random frames and mutated valid frames through parse_frame for every link type.
// Each result must be a defined Drop; an accepted frame must have fields that agree with its own
// IP and TCP headers (read here directly from the bytes at known offsets) and must not depend on
// how many payload bytes were captured. Deterministic seeds; prints the reason distribution.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "dataplane/parse.hpp"
#include "packet_builder.hpp"

namespace spand {
namespace {

using test::FrameOpts;
using test::TcpSeg;
using test::V6Ext;

constexpr LinkType kLinks[] = {LinkType::kEthernet, LinkType::kLinuxSll, LinkType::kLinuxSll2,
                               LinkType::kRaw,      LinkType::kIpv4,     LinkType::kIpv6,
                               LinkType::kNull,     LinkType::kLoop};
constexpr int kRandomFramesPerLink = 100000;
constexpr int kMutatedFramesPerLink = 100000;

struct Tally {
  std::array<uint64_t, static_cast<size_t>(Drop::kCount)> by_reason{};
  uint64_t total = 0;
  void add(Drop d) {
    ++by_reason[static_cast<size_t>(d)];
    ++total;
  }
  void print(const char* title) const {
    std::printf("%s: %llu frames\n", title, static_cast<unsigned long long>(total));
    for (size_t i = 0; i < by_reason.size(); ++i) {
      if (by_reason[i] == 0) continue;
      std::printf("  %-18s %9llu  %5.1f%%\n", drop_name(static_cast<Drop>(i)),
                  static_cast<unsigned long long>(by_reason[i]), 100.0 * by_reason[i] / total);
    }
  }
};

uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

// Where the IP header starts: after the link header and up to two VLAN tags (the frames here
// carry at most two). -1 when something else is there; check_accepted then only applies the
// invariants that need no offsets.
int ip_offset(LinkType link, const uint8_t* b, uint32_t caplen) {
  uint32_t type_at = 0;
  switch (link) {
    case LinkType::kEthernet:
      type_at = 12;
      break;
    case LinkType::kLinuxSll:
      type_at = 14;
      break;
    case LinkType::kLinuxSll2:
      type_at = 0;
      break;
    case LinkType::kNull:
    case LinkType::kLoop:
      return caplen < 4 ? -1 : 4;  // an accepted frame's family said IPv4 or IPv6
    default:
      return 0;
  }
  uint32_t off = link == LinkType::kLinuxSll2 ? 20 : type_at + 2;
  if (caplen < off) return -1;
  uint16_t type = rd16(b + type_at);
  for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8 || type == 0x9100); ++tags) {
    if (caplen < off + 4) return -1;
    type = rd16(b + off + 2);
    off += 4;
  }
  return (type == 0x0800 || type == 0x86dd) ? static_cast<int>(off) : -1;
}

// Checks an accepted frame against its headers. Returns a description of the first problem.
std::string check_accepted(LinkType link, const uint8_t* b, uint32_t caplen, uint32_t wire_len,
                           const ParsedPacket& p) {
  if (p.ip_version != 4 && p.ip_version != 6) return "ip_version";
  if (p.ip_version == 4 && !p.src.is_v4()) return "v4 source not mapped";
  if (p.opt.sack_count > 4) return "sack_count";
  if (p.opt.wscale != 0xff && p.opt.wscale > 14) return "wscale";
  if (p.wire_len < caplen) return "wire_len below caplen";
  // Smallest headers: 20 IP + 20 TCP. An uncut record (caplen == wire_len) may hold a datagram
  // whose IP length is larger than the record (a file that lost the original length); the
  // 16-bit length fields still bound it (IPv6's excludes its 40-byte fixed header).
  if (caplen < wire_len && p.payload_len + 40 > p.wire_len) return "payload_len exceeds the frame";
  if (p.payload_len + 20 > std::max<uint32_t>(p.wire_len, 65535)) return "payload_len too large";
  const int off = ip_offset(link, b, caplen);
  if (off < 0) return "";
  const uint8_t* ip = b + off;
  if (p.ip_version == 4) {
    const uint32_t ihl = (ip[0] & 0x0f) * 4u;
    uint32_t total = rd16(ip + 2);
    if (total == 0) total = wire_len - static_cast<uint32_t>(off);
    const uint8_t* tcp = ip + ihl;
    const uint32_t doff = (tcp[12] >> 4) * 4u;
    if (p.payload_len != total - ihl - doff) return "v4 payload_len disagrees with headers";
    if (p.sport != rd16(tcp) || p.dport != rd16(tcp + 2)) return "v4 ports";
    if (std::memcmp(p.src.bytes.data() + 12, ip + 12, 4) != 0) return "v4 src";
    if (p.flags != tcp[13]) return "flags";
  } else if (ip[6] == 6) {  // IPv6 with TCP right after the fixed header
    uint32_t plen = rd16(ip + 4);
    if (plen == 0) plen = wire_len - static_cast<uint32_t>(off) - 40;
    const uint8_t* tcp = ip + 40;
    const uint32_t doff = (tcp[12] >> 4) * 4u;
    if (p.payload_len != plen - doff) return "v6 payload_len disagrees with headers";
    if (p.sport != rd16(tcp) || p.dport != rd16(tcp + 2)) return "v6 ports";
    if (std::memcmp(p.src.bytes.data(), ip + 8, 16) != 0) return "v6 src";
  }
  return "";
}

bool same_packet(const ParsedPacket& a, const ParsedPacket& b) {
  return a.src == b.src && a.dst == b.dst && a.sport == b.sport && a.dport == b.dport &&
         a.seq == b.seq && a.ack == b.ack && a.flags == b.flags && a.window == b.window &&
         a.payload_len == b.payload_len && a.vlan_outer == b.vlan_outer &&
         a.vlan_inner == b.vlan_inner && a.opt.mss == b.opt.mss && a.opt.wscale == b.opt.wscale &&
         a.opt.has_ts == b.opt.has_ts && a.opt.tsval == b.opt.tsval &&
         a.opt.sack_count == b.opt.sack_count && a.opt.malformed == b.opt.malformed &&
         a.ip_id == b.ip_id;
}

// Runs one frame through the parser from an exact-size heap copy (ASan sees any overread).
// `full` is the same frame with every byte captured, to check that an accepted cut frame decodes
// exactly as the whole one (lengths come from headers, not from the capture).
void run_one(LinkType link, const std::vector<uint8_t>& bytes, uint32_t caplen, uint32_t wire_len,
             Tally& tally, int& failures) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[caplen == 0 ? 1 : caplen]);
  if (caplen != 0) std::memcpy(copy.get(), bytes.data(), caplen);
  ParsedPacket p;
  const Drop d = parse_frame(link, copy.get(), caplen, wire_len, 1, p);
  const auto reason = static_cast<size_t>(d);
  if (reason >= static_cast<size_t>(Drop::kCount) || d == Drop::kFlowTableFull) {
    if (failures++ < 10) ADD_FAILURE() << "undefined drop " << reason;
    return;
  }
  tally.add(d);
  if (d != Drop::kNone) return;
  const std::string problem =
      check_accepted(link, copy.get(), caplen, std::max(wire_len, caplen), p);
  if (!problem.empty()) {
    if (failures++ < 10) ADD_FAILURE() << problem << " (caplen " << caplen << ")";
    return;
  }
  if (caplen < bytes.size() && wire_len >= bytes.size()) {
    ParsedPacket whole;
    const Drop dw =
        parse_frame(link, bytes.data(), static_cast<uint32_t>(bytes.size()), wire_len, 1, whole);
    if (dw != Drop::kNone || !same_packet(p, whole)) {
      if (failures++ < 10) ADD_FAILURE() << "cut frame decodes differently from the whole one";
    }
  }
}

// A varied pool of valid frames for one link type: both families, tags, options, extension
// headers, payload sizes.
std::vector<std::vector<uint8_t>> valid_pool(LinkType link, std::mt19937_64& rng) {
  std::vector<std::vector<uint8_t>> pool;
  const bool l2_tags =
      link == LinkType::kEthernet || link == LinkType::kLinuxSll || link == LinkType::kLinuxSll2;
  for (int i = 0; i < 64; ++i) {
    TcpSeg s;
    bool v6 = (i & 1) != 0;
    if (link == LinkType::kIpv4) v6 = false;
    if (link == LinkType::kIpv6) v6 = true;
    s.src = v6 ? "2001:db8::1" : "10.0.0.1";
    s.dst = v6 ? "2001:db8:5::2" : "192.168.7.2";
    s.sport = static_cast<uint16_t>(rng());
    s.dport = static_cast<uint16_t>(rng());
    s.seq = static_cast<uint32_t>(rng());
    s.ack = static_cast<uint32_t>(rng());
    s.flags = static_cast<uint8_t>(rng());
    s.payload_len = static_cast<uint32_t>(rng() % 1500);
    s.mss = (i & 2) ? 1460 : 0;
    s.wscale = (i & 4) ? 7 : -1;
    s.sack_permitted = (i & 8) != 0;
    s.ts = (i & 16) != 0;
    if (i & 32) s.sack = {{1, 2}, {3, 4}};
    if (l2_tags && (i % 3) == 1) s.vlans = {100};
    if (l2_tags && (i % 3) == 2) s.vlans = {10, 20};
    FrameOpts f;
    f.link = link;
    if (!v6 && (i % 5) == 0) f.ipv4_options = {1, 1, 1, 1, 1, 1, 1};
    if (v6 && (i % 5) == 1) f.v6_ext = {V6Ext{0, 8}, V6Ext{44, 8, 0, true}};
    if (v6 && (i % 5) == 3) f.v6_ext = {V6Ext{60, 16}, V6Ext{51, 12}};
    pool.push_back(test::build_wire_frame(s, f));
  }
  return pool;
}

void make_plausible(LinkType link, bool v4, std::vector<uint8_t>& buf, std::mt19937_64& rng) {
  uint32_t l2 = 0;
  const uint16_t ethertype = v4 ? 0x0800 : 0x86dd;
  if (link == LinkType::kIpv4) v4 = true;
  if (link == LinkType::kIpv6) v4 = false;
  switch (link) {
    case LinkType::kEthernet:
      l2 = 14;
      buf[12] = static_cast<uint8_t>(ethertype >> 8);
      buf[13] = static_cast<uint8_t>(ethertype);
      break;
    case LinkType::kLinuxSll:
      l2 = 16;
      buf[14] = static_cast<uint8_t>(ethertype >> 8);
      buf[15] = static_cast<uint8_t>(ethertype);
      break;
    case LinkType::kLinuxSll2:
      l2 = 20;
      buf[0] = static_cast<uint8_t>(ethertype >> 8);
      buf[1] = static_cast<uint8_t>(ethertype);
      break;
    default:
      break;
  }
  const uint32_t ip_len = static_cast<uint32_t>(buf.size()) - l2;
  uint32_t tcp = 0;
  if (v4) {
    buf[l2] = 0x45;
    buf[l2 + 2] = static_cast<uint8_t>(ip_len >> 8);
    buf[l2 + 3] = static_cast<uint8_t>(ip_len);
    buf[l2 + 6] &= 0xe0;  // fragment offset 0
    buf[l2 + 7] = 0;
    buf[l2 + 9] = 6;
    tcp = l2 + 20;
  } else {
    buf[l2] = 0x60;
    buf[l2 + 4] = static_cast<uint8_t>((ip_len - 40) >> 8);
    buf[l2 + 5] = static_cast<uint8_t>(ip_len - 40);
    buf[l2 + 6] = 6;
    tcp = l2 + 40;
  }
  // Data offset 5..15 within what follows.
  buf[tcp + 12] = static_cast<uint8_t>((5 + rng() % 11) << 4);
}

TEST(ParseFuzz, RandomFrames) {
  std::mt19937_64 rng(0x5eed0001);
  uint64_t frames = 0;
  int failures = 0;
  std::vector<uint8_t> buf;
  for (LinkType link : kLinks) {
    Tally tally;
    for (int i = 0; i < kRandomFramesPerLink; ++i) {
      const uint32_t len = static_cast<uint32_t>(rng() % 160);
      buf.resize(len);
      for (auto& byte : buf) byte = static_cast<uint8_t>(rng());
      // Half the frames get plausible link, IP and TCP header starts (right ethertype,
      // version, IHL, lengths, protocol, data offset), the rest of their bytes random, so random
      // bytes reach the option decoder too.
      if ((i & 1) != 0 && len >= 80) make_plausible(link, (i & 2) != 0, buf, rng);
      const uint32_t wire = (rng() % 4 == 0) ? len + static_cast<uint32_t>(rng() % 2000) : len;
      run_one(link, buf, len, wire, tally, failures);
      ++frames;
    }
    std::printf("random, link type %u\n", static_cast<unsigned>(link));
    tally.print("  random");
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(frames, static_cast<uint64_t>(kRandomFramesPerLink) * std::size(kLinks));
}

TEST(ParseFuzz, MutatedValidFrames) {
  std::mt19937_64 rng(0x5eed0002);
  int failures = 0;
  uint64_t frames = 0;
  std::vector<uint8_t> buf;
  for (LinkType link : kLinks) {
    const std::vector<std::vector<uint8_t>> pool = valid_pool(link, rng);
    // Offsets of the length-bearing fields for this link's untagged frames.
    const uint32_t l2 = link == LinkType::kEthernet    ? 14
                        : link == LinkType::kLinuxSll  ? 16
                        : link == LinkType::kLinuxSll2 ? 20
                                                       : 0;
    Tally tally;
    for (int i = 0; i < kMutatedFramesPerLink; ++i) {
      buf = pool[rng() % pool.size()];
      uint32_t wire = static_cast<uint32_t>(buf.size());
      uint32_t cap = wire;
      switch (rng() % 6) {
        case 0: {  // bit flips
          const int n = 1 + static_cast<int>(rng() % 8);
          for (int k = 0; k < n; ++k)
            buf[rng() % buf.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        }
        case 1:  // random byte values in the first 100 bytes (the headers)
          for (int k = 0; k < 4; ++k)
            buf[rng() % std::min<size_t>(100, buf.size())] = static_cast<uint8_t>(rng());
          break;
        case 2:  // capture truncation
          cap = static_cast<uint32_t>(rng() % (buf.size() + 1));
          break;
        case 3: {  // length fields: IHL / total length / payload length / data offset
          const uint32_t ip = l2;
          const uint8_t r = static_cast<uint8_t>(rng());
          switch (rng() % 4) {
            case 0:
              buf[ip] = static_cast<uint8_t>((buf[ip] & 0xf0) | (r & 0x0f));
              break;
            case 1:
              buf[ip + 2] = r;
              buf[ip + 3] = static_cast<uint8_t>(rng());
              break;
            case 2:
              buf[ip + 4] = r;
              buf[ip + 5] = static_cast<uint8_t>(rng());
              break;
            default: {
              // The TCP data offset byte of an untagged frame without IP options / ext headers.
              const uint32_t tcp = ip + ((buf[ip] >> 4) == 6 ? 40 : 20);
              if (tcp + 12 < buf.size()) buf[tcp + 12] = r;
              break;
            }
          }
          break;
        }
        case 4: {  // TCP option bytes
          const uint32_t tcp = l2 + ((buf[l2] >> 4) == 6 ? 40 : 20);
          const uint32_t at = tcp + 20 + static_cast<uint32_t>(rng() % 20);
          if (at < buf.size()) buf[at] = static_cast<uint8_t>(rng() % 12);
          break;
        }
        default:  // wire length that disagrees with the frame
          wire = static_cast<uint32_t>(rng() % (buf.size() + 200));
          cap = std::min<uint32_t>(cap, static_cast<uint32_t>(rng() % (buf.size() + 1)));
          break;
      }
      run_one(link, buf, cap, wire, tally, failures);
      ++frames;
    }
    std::printf("mutated, link type %u\n", static_cast<unsigned>(link));
    tally.print("  mutated");
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(frames, static_cast<uint64_t>(kMutatedFramesPerLink) * std::size(kLinks));
}

// parse_frame() decodes an untagged Ethernet frame carrying IPv4 (20-byte header) and TCP at
// fixed offsets first, and leaves every other frame to the general decoder. A VLAN tag (VID 0,
// which parses as "untagged") sends the same frame through the general decoder only, with every
// offset and length 4 bytes larger: both must give the same verdict and, when accepted, the same
// fields. Frames: plausible headers (right ethertype, version and IHL 5, lengths, protocol, data
// offset) with random bytes after them, some with random header bytes changed, cut at random
// capture lengths and given longer wire lengths.
TEST(ParseFuzz, EthernetIpv4FastPathAgreesWithGeneralDecoder) {
  std::mt19937_64 rng(0x5eed0003);
  int failures = 0;
  uint64_t accepted = 0;
  std::vector<uint8_t> frame, tagged;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t len = 54 + static_cast<uint32_t>(rng() % 120);
    frame.resize(len);
    for (auto& byte : frame) byte = static_cast<uint8_t>(rng());
    make_plausible(LinkType::kEthernet, true, frame, rng);
    if ((i & 3) == 0) frame[12 + rng() % 42] = static_cast<uint8_t>(rng());  // a header byte
    if ((i & 7) == 1) frame[34 + 20] = static_cast<uint8_t>(rng() % 4);      // NOP, EOL, ...
    if ((i & 7) == 2 && len >= 66) {  // the NOP, NOP, timestamps layout
      frame[46] = 0x80;
      frame[54] = 1;
      frame[55] = 1;
      frame[56] = 8;
      frame[57] = 10;
    }
    const uint32_t caplen = (i & 1) ? len : 54 + static_cast<uint32_t>(rng() % (len - 53));
    const uint32_t wire = (rng() % 4 == 0) ? len + static_cast<uint32_t>(rng() % 2000) : len;
    tagged.assign(frame.begin(), frame.begin() + 12);
    const uint8_t tag[4] = {0x81, 0x00, 0x00, 0x00};  // 802.1Q, VID 0
    tagged.insert(tagged.end(), tag, tag + 4);
    tagged.insert(tagged.end(), frame.begin() + 12, frame.end());
    ParsedPacket a, b;
    const Drop da = parse_frame(LinkType::kEthernet, frame.data(), caplen, wire, 7, a);
    const Drop db = parse_frame(LinkType::kEthernet, tagged.data(), caplen + 4, wire + 4, 7, b);
    bool same = da == db;
    if (same && da == Drop::kNone) {
      ++accepted;
      same = same_packet(a, b) && a.ip_version == b.ip_version && a.ts_ns == b.ts_ns &&
             a.wire_len + 4 == b.wire_len && a.opt.sack_permitted == b.opt.sack_permitted &&
             a.opt.tsecr == b.opt.tsecr &&
             std::memcmp(a.opt.sack, b.opt.sack, sizeof a.opt.sack) == 0;
    }
    if (!same && failures++ < 10) {
      ADD_FAILURE() << "frame " << i << ": untagged " << drop_name(da) << ", tagged "
                    << drop_name(db) << " (caplen " << caplen << ", wire " << wire << ")";
    }
  }
  std::printf("fast path check: %llu of 200000 frames accepted\n",
              static_cast<unsigned long long>(accepted));
  // Most plausible frames are accepted (a cut inside the TCP options, a data offset past the
  // datagram and a changed header byte are the rejections), so the comparison covers both
  // outcomes.
  EXPECT_GT(accepted, 20000u);
  EXPECT_LT(accepted, 190000u);
}

}  // namespace
}  // namespace spand
