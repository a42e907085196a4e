// parse_frame: table-driven cases per link type, tag stack, IP version, extension header, TCP
// option, truncation point and malformation. Expected values come from what the builder was told
// to put on the wire (or from header sizes counted by hand), never from parse_frame's output.
#include "dataplane/parse.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "packet_builder.hpp"

namespace spand {
namespace {

using test::build_frame;
using test::build_wire_frame;
using test::FrameOpts;
using test::TcpSeg;
using test::V6Ext;

// Parses from a heap block of exactly `caplen` bytes so AddressSanitizer flags any overread.
Drop parse_exact(LinkType link, const std::vector<uint8_t>& bytes, uint32_t caplen,
                 uint32_t wire_len, ParsedPacket& out, uint64_t ts_ns = 7) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[caplen == 0 ? 1 : caplen]);
  if (caplen != 0) std::memcpy(copy.get(), bytes.data(), caplen);
  return parse_frame(link, caplen == 0 ? nullptr : copy.get(), caplen, wire_len, ts_ns, out);
}

Drop parse_wire(const TcpSeg& s, const FrameOpts& f, ParsedPacket& out,
                uint32_t snaplen = UINT32_MAX) {
  const std::vector<uint8_t> wire = build_wire_frame(s, f);
  const uint32_t caplen = std::min<uint32_t>(snaplen, static_cast<uint32_t>(wire.size()));
  return parse_exact(f.link, wire, caplen, static_cast<uint32_t>(wire.size()), out);
}

IpAddr addr(const std::string& text) {
  uint8_t b[16]{};
  if (text.find(':') == std::string::npos) {
    EXPECT_EQ(inet_pton(AF_INET, text.c_str(), b), 1);
    return IpAddr::from_v4(b);
  }
  EXPECT_EQ(inet_pton(AF_INET6, text.c_str(), b), 1);
  return IpAddr::from_v6(b);
}

TcpSeg full_seg(const std::string& src, const std::string& dst) {
  TcpSeg s;
  s.src = src;
  s.dst = dst;
  s.sport = 51234;
  s.dport = 443;
  s.seq = 0xdeadbeef;
  s.ack = 0x01020304;
  s.flags = kAck | kPsh;
  s.window = 1234;
  s.payload_len = 1000;
  s.ts = true;
  s.tsval = 0x11223344;
  s.tsecr = 0x55667788;
  s.sack = {{100, 200}, {300, 400}};
  return s;
}

void expect_fields(const ParsedPacket& p, const TcpSeg& s) {
  EXPECT_EQ(p.src, addr(s.src));
  EXPECT_EQ(p.dst, addr(s.dst));
  EXPECT_EQ(p.ip_version, s.src.find(':') == std::string::npos ? 4 : 6);
  EXPECT_EQ(p.sport, s.sport);
  EXPECT_EQ(p.dport, s.dport);
  EXPECT_EQ(p.seq, s.seq);
  EXPECT_EQ(p.ack, s.ack);
  EXPECT_EQ(p.flags, s.flags);
  EXPECT_EQ(p.window, s.window);
  EXPECT_EQ(p.payload_len, s.payload_len);
  EXPECT_EQ(p.opt.mss, s.mss);
  EXPECT_EQ(p.opt.wscale, s.wscale < 0 ? 0xff : std::min(s.wscale, 14));
  EXPECT_EQ(p.opt.sack_permitted, s.sack_permitted);
  EXPECT_EQ(p.opt.has_ts, s.ts);
  if (s.ts) {
    EXPECT_EQ(p.opt.tsval, s.tsval);
    EXPECT_EQ(p.opt.tsecr, s.tsecr);
  }
  ASSERT_EQ(p.opt.sack_count, s.sack.size());
  for (size_t i = 0; i < s.sack.size(); ++i) {
    EXPECT_EQ(p.opt.sack[i].left, s.sack[i].first);
    EXPECT_EQ(p.opt.sack[i].right, s.sack[i].second);
  }
}

// Names each parameterized case after its `name` field.
struct CaseName {
  template <class T>
  std::string operator()(const ::testing::TestParamInfo<T>& param_info) const {
    return param_info.param.name;
  }
};

// ---------------------------------------------------------------------------------------------
// Link types.

struct LinkCase {
  const char* name;
  LinkType link;
  const char* src;
  const char* dst;
  uint32_t l2_bytes;  // link header length, counted from the format's specification
};

const LinkCase kLinkCases[] = {
    {"ethernet_v4", LinkType::kEthernet, "192.0.2.1", "198.51.100.7", 14},
    {"ethernet_v6", LinkType::kEthernet, "2001:db8::1", "2001:db8:1::2", 14},
    {"sll_v4", LinkType::kLinuxSll, "192.0.2.1", "198.51.100.7", 16},
    {"sll_v6", LinkType::kLinuxSll, "2001:db8::1", "2001:db8:1::2", 16},
    {"sll2_v4", LinkType::kLinuxSll2, "192.0.2.1", "198.51.100.7", 20},
    {"sll2_v6", LinkType::kLinuxSll2, "2001:db8::1", "2001:db8:1::2", 20},
    {"raw_v4", LinkType::kRaw, "192.0.2.1", "198.51.100.7", 0},
    {"raw_v6", LinkType::kRaw, "2001:db8::1", "2001:db8:1::2", 0},
    {"ipv4_link", LinkType::kIpv4, "192.0.2.1", "198.51.100.7", 0},
    {"ipv6_link", LinkType::kIpv6, "2001:db8::1", "2001:db8:1::2", 0},
    {"null_v4", LinkType::kNull, "192.0.2.1", "198.51.100.7", 4},
    {"null_v6", LinkType::kNull, "2001:db8::1", "2001:db8:1::2", 4},
    {"loop_v4", LinkType::kLoop, "192.0.2.1", "198.51.100.7", 4},
    {"loop_v6", LinkType::kLoop, "2001:db8::1", "2001:db8:1::2", 4},
};

class LinkTest : public ::testing::TestWithParam<LinkCase> {};

TEST_P(LinkTest, DecodesEveryField) {
  const LinkCase& c = GetParam();
  TcpSeg s = full_seg(c.src, c.dst);
  FrameOpts f;
  f.link = c.link;
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), Drop::kNone);
  expect_fields(p, s);
  EXPECT_EQ(p.vlan_outer, 0);
  EXPECT_EQ(p.vlan_inner, 0);
  EXPECT_EQ(p.ts_ns, 7u);
  const uint32_t ip_hdr = std::string(c.src).find(':') == std::string::npos ? 20 : 40;
  const uint32_t tcp_hdr = 20 + 12 /*NOP NOP TS*/ + 20 /*NOP NOP SACK 2 blocks*/;
  EXPECT_EQ(p.wire_len, c.l2_bytes + ip_hdr + tcp_hdr + s.payload_len);
}

TEST_P(LinkTest, SnapLengthCutKeepsTruePayloadLength) {
  const LinkCase& c = GetParam();
  TcpSeg s = full_seg(c.src, c.dst);
  s.payload_len = 1448;
  FrameOpts f;
  f.link = c.link;
  const uint32_t ip_hdr = std::string(c.src).find(':') == std::string::npos ? 20 : 40;
  const uint32_t headers = c.l2_bytes + ip_hdr + 52;
  // Exactly the headers, headers plus a few payload bytes, and the classic 96/128-byte snaps.
  for (uint32_t snap : {headers, headers + 1, headers + 10, 128u}) {
    if (snap < headers) continue;
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s, f, p, snap), Drop::kNone) << "snaplen " << snap;
    expect_fields(p, s);
    EXPECT_EQ(p.wire_len, headers + 1448);
  }
}

INSTANTIATE_TEST_SUITE_P(Parse, LinkTest, ::testing::ValuesIn(kLinkCases), CaseName());

TEST(Parse, UnsupportedLinkType) {
  const std::vector<uint8_t> frame = build_frame(full_seg("10.0.0.1", "10.0.0.2"));
  ParsedPacket p;
  EXPECT_EQ(parse_exact(static_cast<LinkType>(105), frame, static_cast<uint32_t>(frame.size()),
                        static_cast<uint32_t>(frame.size()), p),
            Drop::kUnsupportedLink);
}

TEST(Parse, RawLinkVersionMismatch) {
  TcpSeg s = full_seg("2001:db8::1", "2001:db8::2");
  FrameOpts f;
  f.link = LinkType::kIpv4;  // LINKTYPE_IPV4 carrying an IPv6 packet
  ParsedPacket p;
  EXPECT_EQ(parse_wire(s, f, p), Drop::kBadIpHeader);
  TcpSeg s4 = full_seg("10.0.0.1", "10.0.0.2");
  f.link = LinkType::kIpv6;
  EXPECT_EQ(parse_wire(s4, f, p), Drop::kBadIpHeader);
}

TEST(Parse, RawLinkUnknownVersion) {
  std::vector<uint8_t> frame = build_frame(full_seg("10.0.0.1", "10.0.0.2"), [] {
    FrameOpts f;
    f.link = LinkType::kRaw;
    return f;
  }());
  frame[0] = static_cast<uint8_t>(0x50 | (frame[0] & 0x0f));
  ParsedPacket p;
  EXPECT_EQ(parse_exact(LinkType::kRaw, frame, static_cast<uint32_t>(frame.size()),
                        static_cast<uint32_t>(frame.size()), p),
            Drop::kBadIpHeader);
}

// LINKTYPE_NULL's family is in the capturing host's byte order: a big-endian host's capture
// (the families of tcpdump's LINKTYPE_NULL list: 2 IPv4; 24, 28, 30 IPv6 by BSD flavour).
TEST(Parse, NullLinkEitherByteOrderAndEveryIpv6Family) {
  for (const bool big : {false, true}) {
    FrameOpts f;
    f.link = LinkType::kNull;
    f.null_big_endian = big;
    TcpSeg s4 = full_seg("10.0.0.1", "10.0.0.2");
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s4, f, p), Drop::kNone) << "big-endian " << big;
    expect_fields(p, s4);
    for (const int family : {24, 28, 30}) {
      f.family = family;
      TcpSeg s6 = full_seg("2001:db8::1", "2001:db8::2");
      ASSERT_EQ(parse_wire(s6, f, p), Drop::kNone) << "family " << family << " big " << big;
      expect_fields(p, s6);
    }
  }
}

TEST(Parse, NullLinkOtherFamiliesAndMismatches) {
  FrameOpts f;
  ParsedPacket p;
  for (const LinkType l : {LinkType::kNull, LinkType::kLoop}) {
    f.link = l;
    f.family = 7;  // AF_ISO: not IP
    EXPECT_EQ(parse_wire(full_seg("10.0.0.1", "10.0.0.2"), f, p), Drop::kNotIp);
    f.family = 10;  // Linux's AF_INET6, which no BSD loopback writes (10 is AF_CCITT there)
    EXPECT_EQ(parse_wire(full_seg("2001:db8::1", "2001:db8::2"), f, p), Drop::kNotIp);
    f.family = 2;  // IPv4's family in front of an IPv6 packet: the version nibble disagrees
    EXPECT_EQ(parse_wire(full_seg("2001:db8::1", "2001:db8::2"), f, p), Drop::kBadIpHeader);
    f.family = 30;
    EXPECT_EQ(parse_wire(full_seg("10.0.0.1", "10.0.0.2"), f, p), Drop::kBadIpHeader);
    // The capture ends inside the 4-byte header.
    f.family = -1;
    const std::vector<uint8_t> frame = build_frame(full_seg("10.0.0.1", "10.0.0.2"), f);
    for (uint32_t cut = 0; cut < 4; ++cut) {
      EXPECT_EQ(parse_exact(l, frame, cut, static_cast<uint32_t>(frame.size()), p),
                Drop::kTruncatedL2)
          << cut;
    }
    EXPECT_EQ(parse_exact(l, frame, 4, static_cast<uint32_t>(frame.size()), p), Drop::kTruncatedIp);
  }
}

// ---------------------------------------------------------------------------------------------
// Tunnels (--decap). The outer headers are written here byte by byte from the RFCs and the
// ERSPAN draft; the inner frame is the builder's.

enum class Tunnel {
  kVxlan,
  kGeneve,
  kGeneveIp,
  kErspan1,
  kErspan2,
  kErspan3,
  kErspan3Sub,
  kGreEth,
  kGreIp
};

void put16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}

// Outer Ethernet, IPv4 (or IPv6) and the tunnel's headers around `inner` (an Ethernet frame; an
// IP packet for kGeneveIp and kGreIp).
std::vector<uint8_t> encapsulate(Tunnel t, const std::vector<uint8_t>& inner,
                                 bool outer_v6 = false) {
  std::vector<uint8_t> tun;  // from the UDP or GRE header on
  const bool udp = t == Tunnel::kVxlan || t == Tunnel::kGeneve || t == Tunnel::kGeneveIp;
  if (t == Tunnel::kVxlan) {
    tun = {0x12, 0x34, 0x12, 0xb5, 0, 0, 0, 0};  // source port, port 4789; length, checksum below
    tun.insert(tun.end(), {0x08, 0, 0, 0, 0x00, 0x01, 0x23, 0x00});  // I flag, VNI 0x123
  } else if (t == Tunnel::kGeneve || t == Tunnel::kGeneveIp) {
    tun = {0x12, 0x34, 0x17, 0xc1, 0, 0, 0, 0};  // port 6081
    tun.push_back(0x02);                         // version 0, 2 words of options
    tun.push_back(0);
    put16(tun, t == Tunnel::kGeneve ? 0x6558 : 0x0800);
    tun.insert(tun.end(), {0, 0, 0x77, 0});                       // VNI
    tun.insert(tun.end(), {0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4});  // one option of 4 bytes
  } else {
    uint16_t flags = 0, type = 0x88be;
    std::vector<uint8_t> after;  // what follows the GRE header's first word
    switch (t) {
      case Tunnel::kErspan1:
        break;
      case Tunnel::kErspan2:
        flags = 0x1000;        // sequence number present
        after = {0, 0, 0, 9};  // sequence
        after.insert(after.end(),
                     {0x10, 0x64, 0, 0x05, 0, 0, 0, 0});  // version 1, VLAN 100, session 5
        break;
      case Tunnel::kErspan3:
      case Tunnel::kErspan3Sub:
        flags = 0x1000;
        type = 0x22eb;
        after = {0, 0, 0, 9};
        after.insert(after.end(), {0x20, 0x64, 0, 0x05, 1, 2, 3, 4, 0, 0, 0,
                                   static_cast<uint8_t>(t == Tunnel::kErspan3Sub ? 1 : 0)});
        if (t == Tunnel::kErspan3Sub) after.insert(after.end(), {9, 9, 9, 9, 9, 9, 9, 9});
        break;
      case Tunnel::kGreEth:
        flags = 0x2000 | 0x1000;  // key and sequence
        type = 0x6558;
        after = {0, 0, 0, 42, 0, 0, 0, 7};
        break;
      default:  // kGreIp, with a checksum word
        flags = 0x8000;
        type = 0x0800;
        after = {0, 0, 0, 0};
        break;
    }
    put16(tun, flags);
    put16(tun, type);
    tun.insert(tun.end(), after.begin(), after.end());
  }
  tun.insert(tun.end(), inner.begin(), inner.end());
  if (udp) {
    tun[4] = static_cast<uint8_t>(tun.size() >> 8);
    tun[5] = static_cast<uint8_t>(tun.size());
  }
  std::vector<uint8_t> frame = {0x02, 0, 0, 0, 0, 0x0a, 0x02, 0, 0, 0, 0, 0x0b};
  const uint8_t proto = udp ? 17 : 47;
  if (!outer_v6) {
    put16(frame, 0x0800);
    frame.insert(frame.end(), {0x45, 0});
    put16(frame, static_cast<uint16_t>(20 + tun.size()));
    frame.insert(frame.end(), {0, 1, 0x40, 0, 64, proto, 0, 0, 10, 9, 9, 1, 10, 9, 9, 2});
  } else {
    put16(frame, 0x86dd);
    frame.insert(frame.end(), {0x60, 0, 0, 0});
    put16(frame, static_cast<uint16_t>(tun.size()));
    frame.push_back(proto);
    frame.push_back(64);
    for (int i = 0; i < 2; ++i)
      frame.insert(frame.end(), {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 static_cast<uint8_t>(i + 1)});
  }
  frame.insert(frame.end(), tun.begin(), tun.end());
  return frame;
}

uint8_t flag_of(Tunnel t) {
  switch (t) {
    case Tunnel::kVxlan:
      return kDecapVxlan;
    case Tunnel::kGeneve:
    case Tunnel::kGeneveIp:
      return kDecapGeneve;
    case Tunnel::kGreEth:
    case Tunnel::kGreIp:
      return kDecapGre;
    default:
      return kDecapErspan;
  }
}

Drop parse_tunneled(const std::vector<uint8_t>& frame, uint8_t decap, ParsedPacket& p,
                    uint32_t caplen = UINT32_MAX) {
  const uint32_t n = std::min<uint32_t>(caplen, static_cast<uint32_t>(frame.size()));
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n == 0 ? 1 : n]);
  if (n != 0) std::memcpy(copy.get(), frame.data(), n);
  return parse_frame(LinkType::kEthernet, copy.get(), n, static_cast<uint32_t>(frame.size()), 7, p,
                     decap);
}

TEST(Parse, TunnelsOpenedOnlyWhenAsked) {
  const Tunnel all[] = {Tunnel::kVxlan,      Tunnel::kGeneve,  Tunnel::kGeneveIp,
                        Tunnel::kErspan1,    Tunnel::kErspan2, Tunnel::kErspan3,
                        Tunnel::kErspan3Sub, Tunnel::kGreEth,  Tunnel::kGreIp};
  for (const bool outer_v6 : {false, true}) {
    for (const Tunnel t : all) {
      for (const char* dst : {"198.51.100.7", "2001:db8:1::2"}) {
        const bool v6 = std::string(dst).find(':') != std::string::npos;
        TcpSeg s = full_seg(v6 ? "2001:db8::1" : "192.0.2.1", dst);
        FrameOpts f;
        const bool ip_inside = t == Tunnel::kGeneveIp || t == Tunnel::kGreIp;
        if (ip_inside && v6) continue;  // the tunnel's type field says IPv4 (0x0800)
        f.link = ip_inside ? LinkType::kRaw : LinkType::kEthernet;
        if (!ip_inside) s.vlans = {300};  // the inner frame's tag is the one reported
        const std::vector<uint8_t> frame = encapsulate(t, build_wire_frame(s, f), outer_v6);
        const std::string what = std::to_string(int(t)) + (outer_v6 ? " v6 " : " v4 ") + dst;
        ParsedPacket p;
        ASSERT_EQ(parse_tunneled(frame, flag_of(t), p), Drop::kNone) << what;
        expect_fields(p, s);
        EXPECT_EQ(p.vlan_outer, ip_inside ? 0 : 300) << what;
        // The outer frame alone is not TCP: without the flag, or with every other flag.
        EXPECT_EQ(parse_tunneled(frame, 0, p), Drop::kNotTcp) << what;
        const uint8_t others = kDecapAll & ~flag_of(t);
        EXPECT_EQ(parse_tunneled(frame, others, p), Drop::kNotTcp) << what;
        // Cut anywhere inside the tunnel's headers: nothing read past the capture (ASan), and
        // never a segment.
        const size_t inner_at = frame.size() - build_wire_frame(s, f).size();
        for (uint32_t cut = 14; cut <= inner_at + 4; ++cut) {
          EXPECT_NE(parse_tunneled(frame, flag_of(t), p, cut), Drop::kNone)
              << what << " cut " << cut;
        }
      }
    }
  }
}

TEST(Parse, TunnelHeadersThatAreNotOurs) {
  const TcpSeg s = full_seg("192.0.2.1", "198.51.100.7");
  const std::vector<uint8_t> inner = build_wire_frame(s, FrameOpts{});
  const uint8_t every = kDecapAll;
  ParsedPacket p;
  std::vector<uint8_t> f = encapsulate(Tunnel::kVxlan, inner);
  f[14 + 20 + 8] = 0;  // VXLAN without the I flag: no valid VNI
  EXPECT_EQ(parse_tunneled(f, every, p), Drop::kNotTcp);
  f = encapsulate(Tunnel::kVxlan, inner);
  f[14 + 20 + 3] = 0xb6;  // UDP port 4790
  EXPECT_EQ(parse_tunneled(f, every, p), Drop::kNotTcp);
  f = encapsulate(Tunnel::kGeneve, inner);
  f[14 + 20 + 8] |= 0x40;  // Geneve version 1
  EXPECT_EQ(parse_tunneled(f, every, p), Drop::kNotTcp);
  f = encapsulate(Tunnel::kGreEth, inner);
  f[14 + 20] |= 0x40;  // GRE with routing (RFC 1701): not read
  EXPECT_EQ(parse_tunneled(f, every, p), Drop::kNotTcp);
  f = encapsulate(Tunnel::kGreEth, inner);
  f[14 + 20 + 1] |= 0x01;  // GRE version 1 (PPTP)
  EXPECT_EQ(parse_tunneled(f, every, p), Drop::kNotTcp);
  // A tunnel whose inner frame is not TCP: the inner frame's reason.
  TcpSeg udp = s;
  FrameOpts fu;
  fu.ip_proto = 17;
  EXPECT_EQ(parse_tunneled(encapsulate(Tunnel::kVxlan, build_wire_frame(udp, fu)), every, p),
            Drop::kNotTcp);
  FrameOpts farp;
  farp.ethertype = 0x0806;
  EXPECT_EQ(parse_tunneled(encapsulate(Tunnel::kVxlan, build_wire_frame(udp, farp)), every, p),
            Drop::kNotIp);
  // One level only: VXLAN inside VXLAN is not opened twice.
  EXPECT_EQ(
      parse_tunneled(encapsulate(Tunnel::kVxlan, encapsulate(Tunnel::kVxlan, inner)), every, p),
      Drop::kNotTcp);
  EXPECT_EQ(parse_tunneled(encapsulate(Tunnel::kVxlan, inner), every, p), Drop::kNone);
}

// ---------------------------------------------------------------------------------------------
// VLAN tags.

struct VlanCase {
  const char* name;
  LinkType link;
  std::vector<uint16_t> vids;
  std::vector<uint16_t> tpids;
  uint16_t want_outer;
  uint16_t want_inner;
};

class VlanTest : public ::testing::TestWithParam<VlanCase> {};

TEST_P(VlanTest, TagsLandInOuterAndInner) {
  const VlanCase& c = GetParam();
  for (const char* src : {"10.1.1.1", "2001:db8::5"}) {
    TcpSeg s =
        full_seg(src, std::string(src).find(':') != std::string::npos ? "2001:db8::6" : "10.1.1.2");
    s.vlans = c.vids;
    FrameOpts f;
    f.link = c.link;
    f.vlan_tpids = c.tpids;
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s, f, p), Drop::kNone) << src;
    expect_fields(p, s);
    EXPECT_EQ(p.vlan_outer, c.want_outer);
    EXPECT_EQ(p.vlan_inner, c.want_inner);
  }
}

const VlanCase kVlanCases[] = {
    {"dot1q", LinkType::kEthernet, {100}, {0x8100}, 100, 0},
    {"dot1q_max_vid", LinkType::kEthernet, {4095}, {0x8100}, 4095, 0},
    {"qinq_88a8", LinkType::kEthernet, {10, 20}, {0x88a8, 0x8100}, 10, 20},
    {"qinq_9100", LinkType::kEthernet, {11, 22}, {0x9100, 0x8100}, 11, 22},
    {"qinq_8100_8100", LinkType::kEthernet, {12, 23}, {0x8100, 0x8100}, 12, 23},
    {"qinq_88a8_88a8", LinkType::kEthernet, {13, 24}, {0x88a8, 0x88a8}, 13, 24},
    {"triple_tag_third_skipped", LinkType::kEthernet, {1, 2, 3}, {0x88a8, 0x8100, 0x8100}, 1, 2},
    {"sll_tag", LinkType::kLinuxSll, {300}, {0x8100}, 300, 0},
    {"sll2_qinq", LinkType::kLinuxSll2, {5, 6}, {0x88a8, 0x8100}, 5, 6},
};

INSTANTIATE_TEST_SUITE_P(Parse, VlanTest, ::testing::ValuesIn(kVlanCases), CaseName());

// The two directions of one connection can carry different tags (a router between VLANs, or a
// mirror that tags only one direction): each frame reports its own.
TEST(Parse, AsymmetricTagsPerDirection) {
  TcpSeg c2s = full_seg("10.0.0.1", "10.0.0.2");
  c2s.vlans = {10, 20};
  TcpSeg s2c = full_seg("10.0.0.2", "10.0.0.1");
  std::swap(s2c.sport, s2c.dport);
  s2c.vlans = {30};
  TcpSeg s2c_untagged = s2c;
  s2c_untagged.vlans = {};
  ParsedPacket a, b, u;
  ASSERT_EQ(parse_wire(c2s, {}, a), Drop::kNone);
  ASSERT_EQ(parse_wire(s2c, {}, b), Drop::kNone);
  ASSERT_EQ(parse_wire(s2c_untagged, {}, u), Drop::kNone);
  EXPECT_EQ(a.vlan_outer, 10);
  EXPECT_EQ(a.vlan_inner, 20);
  EXPECT_EQ(b.vlan_outer, 30);
  EXPECT_EQ(b.vlan_inner, 0);
  EXPECT_EQ(u.vlan_outer, 0);
  EXPECT_EQ(u.vlan_inner, 0);
  expect_fields(a, c2s);
  expect_fields(b, s2c);
}

TEST(Parse, PriorityBitsAreNotPartOfTheVid) {
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  s.vlans = {100};
  std::vector<uint8_t> frame = build_frame(s);
  frame[14] |= 0xe0 | 0x10;  // PCP 7 and DEI set around VID 100
  ParsedPacket p;
  ASSERT_EQ(parse_exact(LinkType::kEthernet, frame, static_cast<uint32_t>(frame.size()),
                        static_cast<uint32_t>(frame.size()), p),
            Drop::kNone);
  EXPECT_EQ(p.vlan_outer, 100);
}

// ---------------------------------------------------------------------------------------------
// IPv4 options, lengths and fragments.

TEST(Parse, Ipv4OptionsEveryIhl) {
  // IHL 6 .. 15: 4 .. 40 bytes of options (NOPs then EOL padding).
  for (uint32_t opt_bytes = 4; opt_bytes <= 40; opt_bytes += 4) {
    TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
    s.payload_len = 77;
    FrameOpts f;
    f.ipv4_options.assign(opt_bytes - 1, 1);
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s, f, p), Drop::kNone) << opt_bytes;
    expect_fields(p, s);
    // Cut just inside the options: the IP header is not all there.
    EXPECT_EQ(parse_wire(s, f, p, 14 + 20 + opt_bytes - 1), Drop::kTruncatedIp);
  }
}

TEST(Parse, Ipv4RecordRouteOption) {
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  FrameOpts f;
  f.ipv4_options = {7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0};  // record route, room for 2 addresses
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), Drop::kNone);
  expect_fields(p, s);
}

struct FragCase {
  const char* name;
  uint16_t offset_8;
  bool more;
  Drop want;
};

class FragTest : public ::testing::TestWithParam<FragCase> {};

TEST_P(FragTest, Ipv4) {
  const FragCase& c = GetParam();
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  FrameOpts f;
  f.dont_fragment = false;
  f.frag_offset_8 = c.offset_8;
  f.more_fragments = c.more;
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), c.want);
  // A first fragment carries the TCP header; its payload length is this fragment's share.
  if (c.want == Drop::kNone) expect_fields(p, s);
}

TEST_P(FragTest, Ipv6FragmentHeader) {
  const FragCase& c = GetParam();
  TcpSeg s = full_seg("2001:db8::1", "2001:db8::2");
  FrameOpts f;
  f.v6_ext = {V6Ext{44, 8, c.offset_8, c.more}};
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), c.want);
  if (c.want == Drop::kNone) expect_fields(p, s);
}

const FragCase kFragCases[] = {
    {"first_with_more_fragments", 0, true, Drop::kNone},
    {"atomic_fragment", 0, false, Drop::kNone},
    {"middle", 185, true, Drop::kIpFragment},
    {"last", 370, false, Drop::kIpFragment},
    {"max_offset", 0x1fff, false, Drop::kIpFragment},
};

INSTANTIATE_TEST_SUITE_P(Parse, FragTest, ::testing::ValuesIn(kFragCases), CaseName());

TEST(Parse, NonFirstFragmentOfUdpIsAFragment) {
  // The fragment check comes before the protocol check: every non-first fragment counts once.
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  FrameOpts f;
  f.ip_proto = 17;
  f.dont_fragment = false;
  f.frag_offset_8 = 100;
  ParsedPacket p;
  EXPECT_EQ(parse_wire(s, f, p), Drop::kIpFragment);
}

struct BadIpCase {
  const char* name;
  bool v6;
  int ihl;
  int total_len;  // IPv4 total length or IPv6 payload length written into the header
  int trim_wire;  // bytes removed from the end of the frame (wire and capture)
  uint32_t snap;  // capture length cut (0 = the whole frame is captured)
  Drop want;
};

class BadIpTest : public ::testing::TestWithParam<BadIpCase> {};

TEST_P(BadIpTest, Rejected) {
  const BadIpCase& c = GetParam();
  TcpSeg s = full_seg(c.v6 ? "2001:db8::1" : "10.0.0.1", c.v6 ? "2001:db8::2" : "10.0.0.2");
  s.payload_len = 100;
  FrameOpts f;
  f.eth_min_frame = 0;
  f.ipv4_ihl = c.ihl;
  if (c.v6) {
    f.ipv6_payload_len = c.total_len;
  } else {
    f.ipv4_total_len = c.total_len;
  }
  std::vector<uint8_t> wire = build_wire_frame(s, f);
  wire.resize(wire.size() - static_cast<size_t>(c.trim_wire));
  const uint32_t wire_len = static_cast<uint32_t>(wire.size());
  const uint32_t caplen = c.snap == 0 ? wire_len : std::min(c.snap, wire_len);
  ParsedPacket p;
  EXPECT_EQ(parse_exact(LinkType::kEthernet, wire, caplen, wire_len, p), c.want);
}

// IPv4 frame: 20 IP + 52 TCP + 100 payload = total length 172. IPv6: payload length 152.
// A length above the frame is only provably wrong when the capture was cut (caplen < wire_len);
// an uncut record may come from a file that lost the original length (see the next test).
const BadIpCase kBadIpCases[] = {
    {"ihl_0", false, 0, -1, 0, 0, Drop::kBadIpHeader},
    {"ihl_4", false, 4, -1, 0, 0, Drop::kBadIpHeader},
    {"total_below_ihl", false, -1, 19, 0, 0, Drop::kBadIpHeader},
    {"ihl_15_above_total", false, 15, 40, 0, 0, Drop::kBadIpHeader},
    {"total_above_wire_cut", false, -1, 173, 0, 100, Drop::kBadIpHeader},
    {"wire_one_short_cut", false, -1, -1, 1, 100, Drop::kBadIpHeader},
    {"total_max_cut", false, -1, 65535, 0, 100, Drop::kBadIpHeader},
    {"total_max_cut_after_ip_header", false, -1, 65535, 0, 34, Drop::kBadIpHeader},
    {"total_leaves_no_tcp_header", false, -1, 39, 0, 0, Drop::kBadTcpHeader},
    {"total_cuts_options", false, -1, 60, 0, 0, Drop::kBadTcpHeader},
    {"total_exactly_headers", false, -1, 72, 0, 0, Drop::kNone},
    {"v6_payload_above_wire_cut", true, -1, 153, 0, 100, Drop::kBadIpHeader},
    {"v6_wire_one_short_cut", true, -1, -1, 1, 100, Drop::kBadIpHeader},
    {"v6_payload_leaves_no_tcp_header", true, -1, 19, 0, 0, Drop::kBadTcpHeader},
    {"v6_payload_exactly_headers", true, -1, 52, 0, 0, Drop::kNone},
};

INSTANTIATE_TEST_SUITE_P(Parse, BadIpTest, ::testing::ValuesIn(kBadIpCases), CaseName());

// Some converters wrote the snap length as the original length, so caplen == wire_len while the
// IP header tells the real size (tcptrace's long_rtt.dmp). With nothing else to go on, the IP
// header wins and the payload length is the datagram's.
TEST(Parse, UncutRecordShorterThanIpLengthTrustsTheIpHeader) {
  for (const char* src : {"10.0.0.1", "2001:db8::1"}) {
    const bool v6 = std::string(src).find(':') != std::string::npos;
    TcpSeg s = full_seg(src, v6 ? "2001:db8::2" : "10.0.0.2");
    s.payload_len = 1400;
    const std::vector<uint8_t> wire = build_frame(s);
    const uint32_t snap = 14 + (v6 ? 40u : 20u) + 52 + 10;
    ParsedPacket p;
    ASSERT_EQ(parse_exact(LinkType::kEthernet, wire, snap, snap, p), Drop::kNone) << src;
    expect_fields(p, s);
  }
}

TEST(Parse, TotalLengthShorterThanFrameIsPaddingAndPayloadFollowsIt) {
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  s.payload_len = 100;
  FrameOpts f;
  f.ipv4_total_len = 20 + 52 + 30;  // the IP header says 30 payload bytes; the rest is padding
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), Drop::kNone);
  EXPECT_EQ(p.payload_len, 30u);
}

TEST(Parse, EthernetPaddingIgnored) {
  // A bare ACK is 54 bytes, padded to 60 on the wire; the padding is not payload, even when the
  // padding bytes are not zero.
  TcpSeg s;
  ParsedPacket p;
  std::vector<uint8_t> frame = build_frame(s);
  ASSERT_EQ(frame.size(), 60u);
  for (size_t i = 54; i < 60; ++i) frame[i] = 0xa5;
  ASSERT_EQ(parse_exact(LinkType::kEthernet, frame, 60, 60, p), Drop::kNone);
  EXPECT_EQ(p.payload_len, 0u);
  EXPECT_EQ(p.wire_len, 60u);
  TcpSeg s6;
  s6.src = "fe80::1";
  s6.dst = "fe80::2";
  s6.payload_len = 1;
  std::vector<uint8_t> f6 = build_frame(s6);
  f6.resize(f6.size() + 8, 0xff);
  ASSERT_EQ(parse_exact(LinkType::kEthernet, f6, static_cast<uint32_t>(f6.size()),
                        static_cast<uint32_t>(f6.size()), p),
            Drop::kNone);
  EXPECT_EQ(p.payload_len, 1u);
}

TEST(Parse, ZeroLengthFieldMeansSegmentationOffload) {
  // Captured TSO/GSO super-segments carry total length 0 (IPv4) or payload length 0 (IPv6);
  // the frame length is then the IP length, as in Wireshark.
  for (const char* src : {"10.0.0.1", "2001:db8::1"}) {
    const bool v6 = std::string(src).find(':') != std::string::npos;
    TcpSeg s = full_seg(src, v6 ? "2001:db8::2" : "10.0.0.2");
    s.payload_len = 60000;
    FrameOpts f;
    if (v6) {
      f.ipv6_payload_len = 0;
    } else {
      f.ipv4_total_len = 0;
    }
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s, f, p, 200), Drop::kNone) << src;
    EXPECT_EQ(p.payload_len, 60000u);
  }
}

// ---------------------------------------------------------------------------------------------
// IPv6 extension headers.

struct V6Case {
  const char* name;
  std::vector<V6Ext> ext;
  uint8_t final_proto;
  Drop want;
};

class V6ExtTest : public ::testing::TestWithParam<V6Case> {};

TEST_P(V6ExtTest, Chain) {
  const V6Case& c = GetParam();
  TcpSeg s = full_seg("2001:db8::1", "2001:db8::2");
  s.payload_len = 321;
  FrameOpts f;
  f.v6_ext = c.ext;
  f.ip_proto = c.final_proto;
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), c.want);
  if (c.want == Drop::kNone) expect_fields(p, s);
  // Cut inside the last extension header: the IP part is truncated.
  if (!c.ext.empty() && c.want != Drop::kNotTcp) {
    uint32_t ext_end = 14 + 40;
    for (const V6Ext& e : c.ext) ext_end += e.len_bytes;
    EXPECT_EQ(parse_wire(s, f, p, ext_end - 1), Drop::kTruncatedIp);
  }
}

const V6Case kV6Cases[] = {
    {"none", {}, 6, Drop::kNone},
    {"hop_by_hop", {{0, 8}}, 6, Drop::kNone},
    {"hop_by_hop_long", {{0, 2048}}, 6, Drop::kNone},
    {"routing", {{43, 24}}, 6, Drop::kNone},
    {"destination_options", {{60, 16}}, 6, Drop::kNone},
    {"auth_header", {{51, 24}}, 6, Drop::kNone},
    {"auth_header_odd_words", {{51, 12}}, 6, Drop::kNone},
    {"mobility", {{135, 8}}, 6, Drop::kNone},
    {"fragment_first", {{44, 8, 0, true}}, 6, Drop::kNone},
    {"fragment_non_first", {{44, 8, 1, true}}, 6, Drop::kIpFragment},
    {"full_chain",
     {{0, 8}, {60, 8}, {43, 24}, {44, 8, 0, true}, {51, 16}, {60, 8}},
     6,
     Drop::kNone},
    {"chain_then_fragment_non_first", {{0, 8}, {43, 24}, {44, 8, 9, false}}, 6, Drop::kIpFragment},
    {"esp", {}, 50, Drop::kNotTcp},
    {"no_next_header", {}, 59, Drop::kNotTcp},
    {"hop_by_hop_then_esp", {{0, 8}}, 50, Drop::kNotTcp},
    {"udp", {}, 17, Drop::kNotTcp},
    {"icmpv6", {}, 58, Drop::kNotTcp},
    {"routing_then_udp", {{43, 24}}, 17, Drop::kNotTcp},
};

INSTANTIATE_TEST_SUITE_P(Parse, V6ExtTest, ::testing::ValuesIn(kV6Cases), CaseName());

TEST(Parse, V6ExtensionLongerThanPayloadLength) {
  TcpSeg s = full_seg("2001:db8::1", "2001:db8::2");
  s.payload_len = 0;
  FrameOpts f;
  f.v6_ext = {{60, 16}};
  f.ipv6_payload_len = 8;  // says 8 bytes follow, the destination options alone take 16
  ParsedPacket p;
  EXPECT_EQ(parse_wire(s, f, p), Drop::kBadIpHeader);
}

// ---------------------------------------------------------------------------------------------
// TCP options.

struct OptCase {
  const char* name;
  std::vector<uint8_t> raw;  // option bytes after the fixed header (padded with EOL)
  Drop want;
  uint16_t mss;
  uint8_t wscale;
  bool sack_permitted;
  bool has_ts;
  uint32_t tsval, tsecr;
  std::vector<SackBlock> sack;
  bool malformed = false;  // an invalid option length ended option parsing
};

class OptTest : public ::testing::TestWithParam<OptCase> {};

TEST_P(OptTest, Decoded) {
  const OptCase& c = GetParam();
  for (const char* src : {"10.0.0.1", "2001:db8::1"}) {
    TcpSeg s =
        full_seg(src, std::string(src).find(':') == std::string::npos ? "10.0.0.2" : "2001:db8::2");
    s.payload_len = 10;
    FrameOpts f;
    f.use_raw_tcp_options = true;
    f.raw_tcp_options = c.raw;
    ParsedPacket p;
    ASSERT_EQ(parse_wire(s, f, p), c.want) << src;
    if (c.want != Drop::kNone) continue;
    EXPECT_EQ(p.payload_len, 10u);
    EXPECT_EQ(p.opt.malformed, c.malformed);
    EXPECT_EQ(p.opt.mss, c.mss);
    EXPECT_EQ(p.opt.wscale, c.wscale);
    EXPECT_EQ(p.opt.sack_permitted, c.sack_permitted);
    EXPECT_EQ(p.opt.has_ts, c.has_ts);
    EXPECT_EQ(p.opt.tsval, c.tsval);
    EXPECT_EQ(p.opt.tsecr, c.tsecr);
    ASSERT_EQ(p.opt.sack_count, c.sack.size());
    for (size_t i = 0; i < c.sack.size(); ++i) {
      EXPECT_EQ(p.opt.sack[i].left, c.sack[i].left);
      EXPECT_EQ(p.opt.sack[i].right, c.sack[i].right);
    }
  }
}

// Option bytes written by hand from RFC 9293 / RFC 7323 / RFC 2018.
const OptCase kOptCases[] = {
    {"none", {}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}},
    {"mss", {2, 4, 0x05, 0xb4}, Drop::kNone, 1460, 0xff, false, false, 0, 0, {}},
    {"wscale_7", {1, 3, 3, 7}, Drop::kNone, 0, 7, false, false, 0, 0, {}},
    {"wscale_0", {3, 3, 0, 0}, Drop::kNone, 0, 0, false, false, 0, 0, {}},
    {"wscale_above_14_clamped", {3, 3, 200, 0}, Drop::kNone, 0, 14, false, false, 0, 0, {}},
    {"wscale_255_clamped", {3, 3, 255, 0}, Drop::kNone, 0, 14, false, false, 0, 0, {}},
    {"sack_permitted", {4, 2, 1, 1}, Drop::kNone, 0, 0xff, true, false, 0, 0, {}},
    {"timestamps",
     {1, 1, 8, 10, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe},
     Drop::kNone,
     0,
     0xff,
     false,
     true,
     1,
     0xfffffffe,
     {}},
    {"sack_1",
     {1, 1, 5, 10, 0, 0, 0, 10, 0, 0, 0, 20},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {{10, 20}}},
    {"sack_4",
     {5, 34, 0, 0, 0, 1, 0, 0, 0, 2,    0,    0,    0,    3, 0, 0, 0,
      4, 0,  0, 0, 5, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 8},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {{1, 2}, {3, 4}, {5, 6}, {0xfffffff0, 8}}},
    {"syn_linux_order",
     {2, 4, 0x23, 0x28, 4, 2, 8, 10, 0, 0, 0, 5, 0, 0, 0, 0, 1, 3, 3, 9},
     Drop::kNone,
     9000,
     9,
     true,
     true,
     5,
     0,
     {}},
    {"ts_then_sack_3",
     {1, 1, 8, 10, 0, 0, 1, 0, 0, 0, 2, 0, 1, 1, 5, 26, 0, 0, 0, 1,
      0, 0, 0, 2,  0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5,  0, 0, 0, 6},
     Drop::kNone,
     0,
     0xff,
     false,
     true,
     256,
     512,
     {{1, 2}, {3, 4}, {5, 6}}},
    {"unknown_kinds_skipped",
     {30, 6, 1, 2, 3, 4, 34, 2, 254, 4, 0xf9, 0x89, 2, 4, 0x05, 0x78},
     Drop::kNone,
     1400,
     0xff,
     false,
     false,
     0,
     0,
     {}},
    {"md5_sig_skipped",
     {19, 18, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 3, 3, 2, 0},
     Drop::kNone,
     0,
     2,
     false,
     false,
     0,
     0,
     {}},
    {"mss_wrong_length_ignored",
     {2, 3, 5, 3, 3, 4, 0, 0},
     Drop::kNone,
     0,
     4,
     false,
     false,
     0,
     0,
     {}},
    // The usual NOP, NOP, TS layout (the parser's fast path) and near misses of it, which must
    // take the general path and give what it gives.
    {"nop_nop_ts_exact_layout",
     {1, 1, 8, 10, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7},
     Drop::kNone,
     0,
     0xff,
     false,
     true,
     0xdeadbeef,
     7,
     {}},
    {"nop_nop_ts_then_padding_not_the_fast_layout",
     {1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 8, 1, 1, 1, 1},
     Drop::kNone,
     0,
     0xff,
     false,
     true,
     9,
     8,
     {}},
    {"nop_nop_ts_length_11_is_malformed",
     {1, 1, 8, 11, 0, 0, 0, 9, 0, 0, 0, 8},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {},
     true},
    {"nop_nop_wscale_not_the_fast_layout",
     {1, 1, 3, 3, 7, 1, 1, 1, 1, 1, 1, 1},
     Drop::kNone,
     0,
     7,
     false,
     false,
     0,
     0,
     {}},
    {"ts_wrong_length_ignored",
     {8, 8, 0, 0, 0, 1, 0, 0},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {}},
    {"sack_odd_length_ignored",
     {5, 6, 0, 0, 0, 1, 1, 1},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {}},
    {"eol_stops_parsing",
     {2, 4, 0x05, 0xb4, 0, 0xff, 0xff, 0xff},
     Drop::kNone,
     1460,
     0xff,
     false,
     false,
     0,
     0,
     {}},
    {"all_nops", {1, 1, 1, 1, 1, 1, 1, 1}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}},
    // An invalid length ends option parsing but keeps the segment and what was decoded before
    // it (Linux's tcp_parse_options does the same); opt.malformed tells the worker to count it.
    {"length_0", {2, 0, 0, 0}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}, true},
    {"length_1", {1, 1, 30, 1}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}, true},
    {"length_past_header", {1, 8, 10, 0}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}, true},
    {"length_byte_missing", {1, 1, 1, 2}, Drop::kNone, 0, 0xff, false, false, 0, 0, {}, true},
    {"sack_past_header",
     {5, 18, 0, 0, 0, 1, 0, 0, 0, 2},
     Drop::kNone,
     0,
     0xff,
     false,
     false,
     0,
     0,
     {},
     true},
    {"mss_kept_before_bad_option",
     {2, 4, 0x05, 0xb4, 3, 0, 3, 7},
     Drop::kNone,
     1460,
     0xff,
     false,
     false,
     0,
     0,
     {},
     true},
};

INSTANTIATE_TEST_SUITE_P(Parse, OptTest, ::testing::ValuesIn(kOptCases), CaseName());

TEST(Parse, BuilderOptionsRoundTrip) {
  // Every combination of the options the builder knows, both families.
  for (int mask = 0; mask < 32; ++mask) {
    for (const char* src : {"172.16.0.9", "2001:db8::9"}) {
      TcpSeg s = full_seg(
          src, std::string(src).find(':') == std::string::npos ? "172.16.0.10" : "2001:db8::a");
      s.mss = (mask & 1) ? 1380 : 0;
      s.wscale = (mask & 2) ? 14 : -1;
      s.sack_permitted = (mask & 4) != 0;
      s.ts = (mask & 8) != 0;
      s.sack.clear();
      if (mask & 16) s.sack = {{1, 2}};
      ParsedPacket p;
      ASSERT_EQ(parse_wire(s, {}, p), Drop::kNone) << mask;
      expect_fields(p, s);
    }
  }
}

struct DoffCase {
  const char* name;
  int doff;
  Drop want;
};

class DoffTest : public ::testing::TestWithParam<DoffCase> {};

TEST_P(DoffTest, DataOffset) {
  const DoffCase& c = GetParam();
  TcpSeg s;
  s.payload_len = 0;  // header only: the IP payload is exactly 20 + 12 option bytes
  FrameOpts f;
  f.use_raw_tcp_options = true;
  f.raw_tcp_options = std::vector<uint8_t>(12, 1);
  f.tcp_data_offset = c.doff;
  ParsedPacket p;
  EXPECT_EQ(parse_wire(s, f, p), c.want);
}

const DoffCase kDoffCases[] = {
    {"doff_0", 0, Drop::kBadTcpHeader},
    {"doff_4", 4, Drop::kBadTcpHeader},
    {"doff_5", 5, Drop::kNone},
    {"doff_8_exact", 8, Drop::kNone},
    {"doff_9_past_ip_payload", 9, Drop::kBadTcpHeader},
    {"doff_15_past_ip_payload", 15, Drop::kBadTcpHeader},
};

INSTANTIATE_TEST_SUITE_P(Parse, DoffTest, ::testing::ValuesIn(kDoffCases), CaseName());

TEST(Parse, DataOffsetFiveWithOptionsMakesThemPayload) {
  TcpSeg s;
  FrameOpts f;
  f.use_raw_tcp_options = true;
  f.raw_tcp_options = {2, 4, 0x05, 0xb4};
  f.tcp_data_offset = 5;
  ParsedPacket p;
  ASSERT_EQ(parse_wire(s, f, p), Drop::kNone);
  EXPECT_EQ(p.opt.mss, 0);
  EXPECT_EQ(p.payload_len, 4u);
}

// ---------------------------------------------------------------------------------------------
// Truncation at every byte offset.

struct TruncCase {
  const char* name;
  LinkType link;
  const char* src;
  std::vector<uint16_t> vlans;
  std::vector<uint8_t> ipv4_options;
  std::vector<V6Ext> v6_ext;
  uint32_t l2_bytes;  // link header plus tags
  uint32_t ip_bytes;  // IP header plus options / extension headers
};

class TruncTest : public ::testing::TestWithParam<TruncCase> {};

TEST_P(TruncTest, EveryCaptureLength) {
  const TruncCase& c = GetParam();
  const bool v6 = std::string(c.src).find(':') != std::string::npos;
  TcpSeg s = full_seg(c.src, v6 ? "2001:db8::99" : "10.9.9.9");
  s.mss = 1460;
  s.payload_len = 64;
  s.vlans = c.vlans;
  FrameOpts f;
  f.link = c.link;
  f.ipv4_options = c.ipv4_options;
  f.v6_ext = c.v6_ext;
  const std::vector<uint8_t> wire = build_wire_frame(s, f);
  const uint32_t tcp_bytes = 20 + 4 /*MSS*/ + 12 /*NOP NOP TS*/ + 20 /*NOP NOP SACK x2*/;
  const uint32_t headers = c.l2_bytes + c.ip_bytes + tcp_bytes;
  ASSERT_EQ(wire.size(), headers + s.payload_len);
  for (uint32_t cap = 0; cap <= wire.size(); ++cap) {
    Drop want = Drop::kNone;
    if (cap < c.l2_bytes) {
      want = Drop::kTruncatedL2;
    } else if (cap < c.l2_bytes + c.ip_bytes) {
      want = Drop::kTruncatedIp;
    } else if (cap < headers) {
      want = Drop::kTruncatedTcp;
    }
    ParsedPacket p;
    ASSERT_EQ(parse_exact(c.link, wire, cap, static_cast<uint32_t>(wire.size()), p), want)
        << "caplen " << cap;
    if (want == Drop::kNone) expect_fields(p, s);
    // The same bytes recorded as uncut (wire_len == caplen): the IP header's length is trusted,
    // so the outcome is the same as for the cut capture.
    if (cap >= c.l2_bytes + c.ip_bytes) {
      ParsedPacket q;
      ASSERT_EQ(parse_exact(c.link, wire, cap, cap, q), want) << "uncut caplen " << cap;
      if (want == Drop::kNone) expect_fields(q, s);
    }
  }
}

const TruncCase kTruncCases[] = {
    {"ethernet_v4", LinkType::kEthernet, "10.0.0.1", {}, {}, {}, 14, 20},
    {"ethernet_v4_options",
     LinkType::kEthernet,
     "10.0.0.1",
     {},
     {1, 1, 1, 1, 1, 1, 1, 0},
     {},
     14,
     28},
    {"dot1q_v4", LinkType::kEthernet, "10.0.0.1", {7}, {}, {}, 18, 20},
    {"qinq_v6", LinkType::kEthernet, "2001:db8::1", {7, 8}, {}, {}, 22, 40},
    {"ethernet_v6_ext",
     LinkType::kEthernet,
     "2001:db8::1",
     {},
     {},
     {{0, 8}, {43, 24}, {44, 8}},
     14,
     80},
    {"sll_v4", LinkType::kLinuxSll, "10.0.0.1", {}, {}, {}, 16, 20},
    {"sll2_v6", LinkType::kLinuxSll2, "2001:db8::1", {}, {}, {}, 20, 40},
    {"raw_v4", LinkType::kRaw, "10.0.0.1", {}, {}, {}, 0, 20},
    {"raw_v6", LinkType::kRaw, "2001:db8::1", {}, {}, {}, 0, 40},
    {"ipv4_link", LinkType::kIpv4, "10.0.0.1", {}, {}, {}, 0, 20},
    {"ipv6_link", LinkType::kIpv6, "2001:db8::1", {}, {}, {}, 0, 40},
};

INSTANTIATE_TEST_SUITE_P(Parse, TruncTest, ::testing::ValuesIn(kTruncCases), CaseName());

// ---------------------------------------------------------------------------------------------
// Not IP, not TCP, odd inputs.

struct EtherTypeCase {
  const char* name;
  LinkType link;
  int ethertype;
  uint8_t ip_proto;
  Drop want;
};

class EtherTypeTest : public ::testing::TestWithParam<EtherTypeCase> {};

TEST_P(EtherTypeTest, Classified) {
  const EtherTypeCase& c = GetParam();
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  FrameOpts f;
  f.link = c.link;
  f.ethertype = c.ethertype;
  f.ip_proto = c.ip_proto;
  ParsedPacket p;
  EXPECT_EQ(parse_wire(s, f, p), c.want);
}

const EtherTypeCase kEtherTypeCases[] = {
    {"arp", LinkType::kEthernet, 0x0806, 6, Drop::kNotIp},
    {"lldp", LinkType::kEthernet, 0x88cc, 6, Drop::kNotIp},
    {"mpls", LinkType::kEthernet, 0x8847, 6, Drop::kNotIp},
    {"ieee8023_length", LinkType::kEthernet, 0x05dc, 6, Drop::kNotIp},
    {"sll_arp", LinkType::kLinuxSll, 0x0806, 6, Drop::kNotIp},
    {"sll2_llc", LinkType::kLinuxSll2, 0x0004, 6, Drop::kNotIp},
    // IPv6 ethertype in front of an IPv4 packet: the version nibble disagrees.
    {"ethertype_v6_packet_v4", LinkType::kEthernet, 0x86dd, 6, Drop::kBadIpHeader},
    {"udp", LinkType::kEthernet, -1, 17, Drop::kNotTcp},
    {"icmp", LinkType::kEthernet, -1, 1, Drop::kNotTcp},
    {"sctp", LinkType::kEthernet, -1, 132, Drop::kNotTcp},
    {"raw_udp", LinkType::kRaw, -1, 17, Drop::kNotTcp},
};

INSTANTIATE_TEST_SUITE_P(Parse, EtherTypeTest, ::testing::ValuesIn(kEtherTypeCases), CaseName());

TEST(Parse, EmptyAndNullInput) {
  ParsedPacket p;
  for (LinkType l : {LinkType::kEthernet, LinkType::kLinuxSll, LinkType::kLinuxSll2, LinkType::kRaw,
                     LinkType::kIpv4, LinkType::kIpv6, LinkType::kNull, LinkType::kLoop}) {
    const Drop d = parse_frame(l, nullptr, 0, 0, 0, p);
    EXPECT_TRUE(d == Drop::kTruncatedL2 || d == Drop::kTruncatedIp) << drop_name(d);
  }
}

TEST(Parse, WireLenBelowCaplenTrustsTheBytes) {
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  const std::vector<uint8_t> frame = build_frame(s);
  ParsedPacket p;
  ASSERT_EQ(parse_exact(LinkType::kEthernet, frame, static_cast<uint32_t>(frame.size()), 0, p),
            Drop::kNone);
  EXPECT_EQ(p.wire_len, frame.size());
  expect_fields(p, s);
}

TEST(Parse, OutputIsResetBetweenFrames) {
  TcpSeg a = full_seg("10.0.0.1", "10.0.0.2");
  a.vlans = {5, 6};
  a.mss = 1400;
  a.wscale = 3;
  a.sack_permitted = true;
  TcpSeg b;
  ParsedPacket p;
  ASSERT_EQ(parse_wire(a, {}, p), Drop::kNone);
  ASSERT_EQ(parse_wire(b, {}, p), Drop::kNone);
  expect_fields(p, b);
  EXPECT_EQ(p.vlan_outer, 0);
  EXPECT_EQ(p.vlan_inner, 0);
}

TEST(Parse, MakePacketHelper) {
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  s.vlans = {42};
  const ParsedPacket p = test::make_packet(s, 123456789);
  EXPECT_EQ(p.ts_ns, 123456789u);
  EXPECT_EQ(p.vlan_outer, 42);
  EXPECT_EQ(p.wire_len, test::wire_len_of(s));
  expect_fields(p, s);
}

TEST(Parse, BuilderChecksumsVerify) {
  // The IPv4 header checksum of a built frame sums to 0xffff (RFC 1071), so captures look real.
  TcpSeg s = full_seg("10.0.0.1", "10.0.0.2");
  FrameOpts f;
  f.ipv4_options = {1, 1, 1, 0};
  const std::vector<uint8_t> frame = build_frame(s, f);
  uint32_t sum = 0;
  for (size_t i = 14; i < 14 + 24; i += 2) sum += (frame[i] << 8) | frame[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);
}

TEST(Parse, DropNamesAreDistinctSnakeCase) {
  std::set<std::string> seen;
  // snake_case: lower-case words joined by single underscores (metric label values).
  const auto snake = [](const std::string& n) {
    if (n.empty() || n.front() < 'a' || n.front() > 'z' || n.back() == '_') return false;
    for (size_t i = 0; i < n.size(); ++i) {
      const char c = n[i];
      if (c == '_' && n[i - 1] == '_') return false;
      if (c != '_' && (c < 'a' || c > 'z') && (c < '0' || c > '9')) return false;
    }
    return true;
  };
  for (int i = 0; i < static_cast<int>(Drop::kCount); ++i) {
    const std::string name = drop_name(static_cast<Drop>(i));
    EXPECT_TRUE(snake(name)) << name;
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
  EXPECT_STREQ(drop_name(Drop::kNone), "none");
  EXPECT_STREQ(drop_name(Drop::kTruncatedTcp), "truncated_tcp");
  EXPECT_STREQ(drop_name(Drop::kIpFragment), "ip_fragment");
  EXPECT_STREQ(drop_name(Drop::kFlowTableFull), "flow_table_full");
  EXPECT_STREQ(drop_name(static_cast<Drop>(200)), "unknown");
}

}  // namespace
}  // namespace spand
