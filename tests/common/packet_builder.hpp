// Header-only frame builder for tests: TCP segments over IPv4/IPv6 (options, fragments, extension
// headers) over Ethernet (802.1Q, QinQ), Linux SLL/SLL2, raw IP or BSD loopback, with real IPv4
// header and TCP checksums so a dump in Wireshark looks like a capture. Payload bytes are zeros;
// `snaplen` cuts the returned bytes the way a capture's snap length does, the lengths in the
// headers stay true. Test code only: it allocates and aborts freely.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/packet.hpp"
#include "dataplane/parse.hpp"

namespace spand::test {

struct TcpSeg {
  std::string src = "10.0.0.1";
  std::string dst = "10.0.0.2";
  uint16_t sport = 40000, dport = 80;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = kAck;
  uint16_t window = 65535;
  uint32_t payload_len = 0;
  uint16_t mss = 0;  // 0 = no MSS option
  int wscale = -1;   // -1 = no window scale option
  bool sack_permitted = false;
  bool ts = false;
  uint32_t tsval = 0, tsecr = 0;
  std::vector<std::pair<uint32_t, uint32_t>> sack;  // SACK blocks (left, right)
  std::vector<uint16_t> vlans;                      // VLAN IDs, outer first
};

// One IPv6 extension header placed between the fixed header and TCP, in order. `len_bytes` is
// the whole header length (a multiple of 8, AH a multiple of 4, at least 8); the builder fills
// next-header and the length field.
struct V6Ext {
  uint8_t type = 60;  // 0 hop-by-hop, 43 routing, 44 fragment, 51 AH, 60 destination options
  uint32_t len_bytes = 8;
  uint16_t frag_offset_8 = 0;  // fragment header only: offset in 8-byte units
  bool more_fragments = false;
};

// Everything about a frame beyond the TCP segment itself. The defaults give a plain Ethernet
// frame padded to the 60-byte Ethernet minimum (FCS not captured), like a mirror port shows.
struct FrameOpts {
  LinkType link = LinkType::kEthernet;
  // TPID per tag, outer first; empty = 0x8100 for a single tag, 0x88a8 then 0x8100 for QinQ.
  std::vector<uint16_t> vlan_tpids;
  int ethertype = -1;  // >= 0: override the ethertype / SLL protocol after the tags
  // LINKTYPE_NULL/LOOP: the address family (-1: 2 for IPv4; for IPv6 30, macOS's, on NULL and
  // 24, OpenBSD's, on LOOP), and for NULL the capturing host's byte order.
  int family = -1;
  bool null_big_endian = false;
  uint32_t eth_min_frame = 60;
  // IPv4
  std::vector<uint8_t> ipv4_options;  // padded to a multiple of 4 with EOL
  uint16_t frag_offset_8 = 0;         // IPv4 fragment offset in 8-byte units
  bool more_fragments = false;
  bool dont_fragment = true;
  uint16_t ip_id = 0x1234;
  uint8_t ttl = 64;
  int ipv4_total_len = -1;  // >= 0: write this total length instead of the true one
  int ipv4_ihl = -1;        // >= 0: write this IHL nibble instead of the true one
  // IPv6
  std::vector<V6Ext> v6_ext;
  int ipv6_payload_len = -1;  // >= 0: write this payload length instead of the true one
  // Both
  uint8_t ip_proto = 6;  // protocol / final next header (6 = TCP; the TCP bytes stay)
  // TCP
  bool use_raw_tcp_options = false;      // true: raw_tcp_options replace the ones from TcpSeg
  std::vector<uint8_t> raw_tcp_options;  // padded to a multiple of 4 with EOL
  int tcp_data_offset = -1;              // >= 0: write this data-offset nibble instead
};

namespace detail {

inline void put16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  v[at] = static_cast<uint8_t>(x >> 8);
  v[at + 1] = static_cast<uint8_t>(x);
}
inline void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  put16(v, at, static_cast<uint16_t>(x >> 16));
  put16(v, at + 2, static_cast<uint16_t>(x));
}
inline void push16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}
inline void push32(std::vector<uint8_t>& v, uint32_t x) {
  push16(v, static_cast<uint16_t>(x >> 16));
  push16(v, static_cast<uint16_t>(x));
}

// RFC 1071 one's-complement sum, folded at the end.
inline uint32_t csum_add(uint32_t sum, const uint8_t* p, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>((p[i] << 8) | p[i + 1]);
  if (n & 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  return sum;
}
inline uint16_t csum_fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

struct Addr {
  bool v6 = false;
  uint8_t b[16]{};
};

inline Addr parse_addr(const std::string& text) {
  Addr a;
  a.v6 = text.find(':') != std::string::npos;
  if (inet_pton(a.v6 ? AF_INET6 : AF_INET, text.c_str(), a.b) != 1) {
    std::fprintf(stderr, "packet_builder: bad address '%s'\n", text.c_str());
    std::abort();
  }
  return a;
}

inline void pad4(std::vector<uint8_t>& opts) {
  while (opts.size() % 4 != 0) opts.push_back(0);  // EOL
}

}  // namespace detail

// TCP options in the order Linux sends them on a SYN (MSS, SACK-permitted, timestamps, window
// scale), NOP-aligned like Linux so the byte layout is realistic.
inline std::vector<uint8_t> tcp_options_of(const TcpSeg& s) {
  std::vector<uint8_t> o;
  if (s.mss != 0) {
    o.insert(o.end(), {2, 4});
    detail::push16(o, s.mss);
  }
  if (s.sack_permitted && s.ts) {
    o.insert(o.end(), {4, 2});
  } else if (s.sack_permitted) {
    o.insert(o.end(), {1, 1, 4, 2});
  }
  if (s.ts) {
    if (!s.sack_permitted) o.insert(o.end(), {1, 1});
    o.insert(o.end(), {8, 10});
    detail::push32(o, s.tsval);
    detail::push32(o, s.tsecr);
  }
  if (s.wscale >= 0) o.insert(o.end(), {1, 3, 3, static_cast<uint8_t>(s.wscale)});
  if (!s.sack.empty()) {
    o.insert(o.end(), {1, 1, 5, static_cast<uint8_t>(2 + 8 * s.sack.size())});
    for (const auto& [left, right] : s.sack) {
      detail::push32(o, left);
      detail::push32(o, right);
    }
  }
  detail::pad4(o);
  return o;
}

// The IP packet (header(s) + TCP header + zero payload), complete, with checksums.
inline std::vector<uint8_t> build_ip_packet(const TcpSeg& s, const FrameOpts& f = {}) {
  const detail::Addr src = detail::parse_addr(s.src);
  const detail::Addr dst = detail::parse_addr(s.dst);
  if (src.v6 != dst.v6) {
    std::fprintf(stderr, "packet_builder: mixed address families\n");
    std::abort();
  }
  std::vector<uint8_t> opts = f.use_raw_tcp_options ? f.raw_tcp_options : tcp_options_of(s);
  detail::pad4(opts);
  const size_t tcp_hdr = 20 + opts.size();
  std::vector<uint8_t> tcp(tcp_hdr + s.payload_len, 0);
  detail::put16(tcp, 0, s.sport);
  detail::put16(tcp, 2, s.dport);
  detail::put32(tcp, 4, s.seq);
  detail::put32(tcp, 8, s.ack);
  const int doff = f.tcp_data_offset >= 0 ? f.tcp_data_offset : static_cast<int>(tcp_hdr / 4);
  tcp[12] = static_cast<uint8_t>((doff & 0x0f) << 4);
  tcp[13] = s.flags;
  detail::put16(tcp, 14, s.window);
  std::copy(opts.begin(), opts.end(), tcp.begin() + 20);

  std::vector<uint8_t> ip;
  uint32_t pseudo = 0;
  if (!src.v6) {
    std::vector<uint8_t> ipopts = f.ipv4_options;
    detail::pad4(ipopts);
    const size_t hdr = 20 + ipopts.size();
    ip.assign(hdr, 0);
    const int ihl = f.ipv4_ihl >= 0 ? f.ipv4_ihl : static_cast<int>(hdr / 4);
    ip[0] = static_cast<uint8_t>(0x40 | (ihl & 0x0f));
    const size_t total = hdr + tcp.size();
    detail::put16(ip, 2, static_cast<uint16_t>(f.ipv4_total_len >= 0 ? f.ipv4_total_len : total));
    detail::put16(ip, 4, f.ip_id);
    detail::put16(
        ip, 6,
        static_cast<uint16_t>((f.dont_fragment ? 0x4000 : 0) | (f.more_fragments ? 0x2000 : 0) |
                              (f.frag_offset_8 & 0x1fff)));
    ip[8] = f.ttl;
    ip[9] = f.ip_proto;
    std::copy(src.b, src.b + 4, ip.begin() + 12);
    std::copy(dst.b, dst.b + 4, ip.begin() + 16);
    std::copy(ipopts.begin(), ipopts.end(), ip.begin() + 20);
    detail::put16(ip, 10, detail::csum_fold(detail::csum_add(0, ip.data(), ip.size())));
    pseudo = detail::csum_add(pseudo, src.b, 4);
    pseudo = detail::csum_add(pseudo, dst.b, 4);
  } else {
    ip.assign(40, 0);
    ip[0] = 0x60;
    ip[7] = f.ttl;
    std::copy(src.b, src.b + 16, ip.begin() + 8);
    std::copy(dst.b, dst.b + 16, ip.begin() + 24);
    size_t nh_at = 6;  // where the next-header byte that announces the following header lives
    for (const V6Ext& e : f.v6_ext) {
      const size_t at = ip.size();
      ip[nh_at] = e.type;
      ip.resize(at + e.len_bytes, 0);
      if (e.type == 44) {
        detail::put16(ip, at + 2,
                      static_cast<uint16_t>((e.frag_offset_8 << 3) | (e.more_fragments ? 1 : 0)));
        detail::put32(ip, at + 4, 0xabcd0001);
      } else if (e.type == 51) {
        ip[at + 1] = static_cast<uint8_t>(e.len_bytes / 4 - 2);
      } else {
        ip[at + 1] = static_cast<uint8_t>(e.len_bytes / 8 - 1);
        // Fill options with PadN so hop-by-hop/destination options are well formed.
        if ((e.type == 0 || e.type == 60) && e.len_bytes > 2) {
          ip[at + 2] = 1;
          ip[at + 3] = static_cast<uint8_t>(e.len_bytes - 4);
        }
      }
      nh_at = at;
    }
    ip[nh_at] = f.ip_proto;
    const size_t plen = ip.size() - 40 + tcp.size();
    detail::put16(ip, 4,
                  static_cast<uint16_t>(f.ipv6_payload_len >= 0 ? f.ipv6_payload_len : plen));
    pseudo = detail::csum_add(pseudo, src.b, 16);
    pseudo = detail::csum_add(pseudo, dst.b, 16);
  }
  // TCP checksum over the pseudo header (addresses, protocol, TCP length) and the segment.
  pseudo += 6;
  pseudo += static_cast<uint32_t>(tcp.size() >> 16) + static_cast<uint32_t>(tcp.size() & 0xffff);
  detail::put16(tcp, 16, detail::csum_fold(detail::csum_add(pseudo, tcp.data(), tcp.size())));
  ip.insert(ip.end(), tcp.begin(), tcp.end());
  return ip;
}

// The complete frame on the wire (before any snap length cut).
inline std::vector<uint8_t> build_wire_frame(const TcpSeg& s, const FrameOpts& f) {
  const std::vector<uint8_t> ip = build_ip_packet(s, f);
  const bool v6 = (ip[0] >> 4) == 6;
  const uint16_t ip_ethertype =
      f.ethertype >= 0 ? static_cast<uint16_t>(f.ethertype) : (v6 ? 0x86dd : 0x0800);
  std::vector<uint8_t> l2;
  // Tags go between the link header and the IP packet: TPID of tag i is in the field before it.
  std::vector<uint8_t> tags;
  uint16_t first_type = ip_ethertype;
  for (size_t i = 0; i < s.vlans.size(); ++i) {
    uint16_t tpid = 0x8100;
    if (i < f.vlan_tpids.size()) {
      tpid = f.vlan_tpids[i];
    } else if (s.vlans.size() > 1 && i == 0) {
      tpid = 0x88a8;
    }
    if (i == 0) {
      first_type = tpid;
    } else {
      detail::push16(tags, tpid);  // ends the previous tag
    }
    detail::push16(tags, static_cast<uint16_t>(s.vlans[i] & 0x0fff));
  }
  if (!s.vlans.empty()) detail::push16(tags, ip_ethertype);

  switch (f.link) {
    case LinkType::kEthernet:
      l2 = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};  // dst, src MAC
      detail::push16(l2, first_type);
      break;
    case LinkType::kLinuxSll:
      l2 = {0, 0, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 0x01, 0, 0};  // to-us, ARPHRD_ETHER, MAC
      detail::push16(l2, first_type);
      break;
    case LinkType::kLinuxSll2:
      detail::push16(l2, first_type);
      l2.insert(l2.end(), {0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 0x01, 0, 0});
      break;
    case LinkType::kNull:
    case LinkType::kLoop: {
      const uint32_t fam = f.family >= 0               ? static_cast<uint32_t>(f.family)
                           : !v6                       ? 2u
                           : f.link == LinkType::kNull ? 30u
                                                       : 24u;
      const bool big = f.link == LinkType::kLoop || f.null_big_endian;
      for (int i = 0; i < 4; ++i) {
        const int shift = big ? 24 - 8 * i : 8 * i;
        l2.push_back(static_cast<uint8_t>(fam >> shift));
      }
    }
      [[fallthrough]];
    case LinkType::kRaw:
    case LinkType::kIpv4:
    case LinkType::kIpv6:
      if (!s.vlans.empty()) {
        std::fprintf(stderr, "packet_builder: VLAN tags on a raw-IP link\n");
        std::abort();
      }
      break;
  }
  std::vector<uint8_t> frame = l2;
  frame.insert(frame.end(), tags.begin(), tags.end());
  frame.insert(frame.end(), ip.begin(), ip.end());
  if (f.link == LinkType::kEthernet && frame.size() < f.eth_min_frame) {
    frame.resize(f.eth_min_frame, 0);
  }
  return frame;
}

inline std::vector<uint8_t> build_frame(const TcpSeg& s, const FrameOpts& f,
                                        uint32_t snaplen = UINT32_MAX) {
  std::vector<uint8_t> frame = build_wire_frame(s, f);
  if (frame.size() > snaplen) frame.resize(snaplen);
  return frame;
}

inline std::vector<uint8_t> build_frame(const TcpSeg& s, uint32_t snaplen = UINT32_MAX) {
  return build_frame(s, FrameOpts{}, snaplen);
}

inline uint32_t wire_len_of(const TcpSeg& s, const FrameOpts& f) {
  return static_cast<uint32_t>(build_wire_frame(s, f).size());
}

inline uint32_t wire_len_of(const TcpSeg& s) {
  return wire_len_of(s, FrameOpts{});
}

// Parses the built Ethernet frame; aborts (failing the test) if it does not parse.
inline ParsedPacket make_packet(const TcpSeg& s, uint64_t ts_ns, const FrameOpts& f = {},
                                uint32_t snaplen = UINT32_MAX) {
  const std::vector<uint8_t> wire = build_wire_frame(s, f);
  const uint32_t caplen = wire.size() > snaplen ? snaplen : static_cast<uint32_t>(wire.size());
  ParsedPacket p;
  const Drop d =
      parse_frame(f.link, wire.data(), caplen, static_cast<uint32_t>(wire.size()), ts_ns, p);
  if (d != Drop::kNone) {
    std::fprintf(stderr, "packet_builder: make_packet: frame dropped as %s\n", drop_name(d));
    std::abort();
  }
  return p;
}

}  // namespace spand::test
