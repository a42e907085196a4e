// Frame decoder (see parse.hpp). Every read is checked against the captured length first; every
// length that describes the frame on the wire (IP total length, IPv6 payload length) is checked
// against wire_len, so a snap-length-cut capture still gives the true TCP payload length.
#include "dataplane/parse.hpp"

#include <cstddef>
#include <cstring>

namespace spand {

namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100;     // 802.1Q customer tag
constexpr uint16_t kEtherQinQ = 0x88a8;     // 802.1ad service tag
constexpr uint16_t kEtherQinQOld = 0x9100;  // pre-standard QinQ tag still seen on old switches

constexpr uint32_t kEthHeaderBytes = 14;
constexpr uint32_t kVlanTagBytes = 4;
constexpr uint32_t kSllHeaderBytes = 16;
constexpr uint32_t kSllProtocolOffset = 14;
constexpr uint32_t kSll2HeaderBytes = 20;
constexpr uint32_t kSll2ProtocolOffset = 0;
constexpr uint32_t kNullHeaderBytes = 4;
// Address families in a LINKTYPE_NULL/LOOP header (libpcap's LINKTYPE_NULL description): IPv4 is
// 2 everywhere; IPv6 is 24 on NetBSD, OpenBSD and BSD/OS, 28 on FreeBSD, 30 on macOS.
constexpr uint32_t kBsdAfInet = 2;
constexpr uint32_t kBsdAfInet6Bsd = 24;
constexpr uint32_t kBsdAfInet6FreeBsd = 28;
constexpr uint32_t kBsdAfInet6Darwin = 30;

constexpr uint32_t kIpv4MinHeaderBytes = 20;
constexpr uint32_t kIpv6HeaderBytes = 40;
constexpr uint32_t kTcpMinHeaderBytes = 20;
constexpr uint16_t kIpv4FragOffsetMask = 0x1fff;

constexpr uint8_t kProtoTcp = 6;
// IPv6 next-header values that are extension headers we skip (RFC 8200 section 4, RFC 6564
// uniform format for mobility, HIP and shim6).
constexpr uint8_t kV6HopByHop = 0;
constexpr uint8_t kV6Routing = 43;
constexpr uint8_t kV6Fragment = 44;
constexpr uint8_t kV6Esp = 50;
constexpr uint8_t kV6Auth = 51;
constexpr uint8_t kV6NoNext = 59;
constexpr uint8_t kV6DestOpts = 60;
constexpr uint8_t kV6Mobility = 135;
constexpr uint8_t kV6Hip = 139;
constexpr uint8_t kV6Shim6 = 140;
constexpr uint32_t kV6FragmentHeaderBytes = 8;

constexpr uint8_t kOptEol = 0;
constexpr uint8_t kOptNop = 1;
constexpr uint8_t kOptMss = 2;
constexpr uint8_t kOptWscale = 3;
constexpr uint8_t kOptSackPermitted = 4;
constexpr uint8_t kOptSack = 5;
constexpr uint8_t kOptTimestamps = 8;
constexpr uint8_t kOptMssBytes = 4;
constexpr uint8_t kOptWscaleBytes = 3;
constexpr uint8_t kOptSackPermittedBytes = 2;
constexpr uint8_t kOptTimestampsBytes = 10;
constexpr uint8_t kSackBlockBytes = 8;
// RFC 7323 section 2.3: a shift above 14 must be treated as 14. Clamping also keeps 0xff free
// as the "absent" marker.
constexpr uint8_t kMaxWscale = 14;

inline uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
inline uint32_t rd32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

inline uint32_t rd32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

inline bool is_vlan_tpid(uint16_t ethertype) {
  return ethertype == kEtherVlan || ethertype == kEtherQinQ || ethertype == kEtherQinQOld;
}

// Walks any stack of VLAN tags that starts at `off` (the ethertype that announced the first tag
// is `ethertype`). The first tag is the outer one; a third or deeper tag is skipped, not stored.
inline Drop skip_vlan_tags(const uint8_t* data, uint32_t caplen, uint32_t& off, uint16_t& ethertype,
                           ParsedPacket& out) {
  int depth = 0;
  while (is_vlan_tpid(ethertype)) {
    if (caplen - off < kVlanTagBytes) return Drop::kTruncatedL2;
    const uint16_t vid = rd16(data + off) & 0x0fff;
    if (depth == 0) {
      out.vlan_outer = vid;
    } else if (depth == 1) {
      out.vlan_inner = vid;
    }
    ++depth;
    ethertype = rd16(data + off + 2);
    off += kVlanTagBytes;
  }
  return Drop::kNone;
}

inline bool is_v6_generic_ext(uint8_t nh) {
  return nh == kV6HopByHop || nh == kV6Routing || nh == kV6DestOpts || nh == kV6Mobility ||
         nh == kV6Hip || nh == kV6Shim6;
}

// Parses the options in hdr[20, hdr_bytes). The caller has checked that all hdr_bytes are
// captured. Known options with a wrong length are ignored, as Linux's tcp_parse_options does.
inline Drop parse_tcp_options(const uint8_t* hdr, uint32_t hdr_bytes, TcpOptions& opt) {
  uint32_t i = kTcpMinHeaderBytes;
  // Nearly every segment after the handshake carries exactly NOP, NOP, timestamps (RFC 7323,
  // appendix A): take that layout at once; anything else goes through the general loop.
  if (hdr_bytes == kTcpMinHeaderBytes + 12 && rd32(hdr + i) == 0x0101080au) {
    opt.has_ts = true;
    opt.tsval = rd32(hdr + i + 4);
    opt.tsecr = rd32(hdr + i + 8);
    return Drop::kNone;
  }
  while (i < hdr_bytes) {
    const uint8_t kind = hdr[i];
    if (kind == kOptEol) break;
    if (kind == kOptNop) {
      ++i;
      continue;
    }
    if (hdr_bytes - i < 2) return Drop::kBadTcpOption;
    const uint8_t len = hdr[i + 1];
    if (len < 2 || len > hdr_bytes - i) return Drop::kBadTcpOption;
    const uint8_t* o = hdr + i;
    switch (kind) {
      case kOptMss:
        if (len == kOptMssBytes) opt.mss = rd16(o + 2);
        break;
      case kOptWscale:
        if (len == kOptWscaleBytes) opt.wscale = o[2] > kMaxWscale ? kMaxWscale : o[2];
        break;
      case kOptSackPermitted:
        if (len == kOptSackPermittedBytes) opt.sack_permitted = true;
        break;
      case kOptSack:
        if (len >= 2 + kSackBlockBytes && (len - 2) % kSackBlockBytes == 0) {
          uint32_t n = (len - 2u) / kSackBlockBytes;
          if (n > 4) n = 4;
          for (uint32_t b = 0; b < n; ++b) {
            opt.sack[b].left = rd32(o + 2 + b * kSackBlockBytes);
            opt.sack[b].right = rd32(o + 6 + b * kSackBlockBytes);
          }
          opt.sack_count = static_cast<uint8_t>(n);
        }
        break;
      case kOptTimestamps:
        if (len == kOptTimestampsBytes) {
          opt.has_ts = true;
          opt.tsval = rd32(o + 2);
          opt.tsecr = rd32(o + 6);
        }
        break;
      default:
        break;  // unknown options (MPTCP, TFO, MD5, ...) are skipped by their length
    }
    i += len;
  }
  return Drop::kNone;
}

// The TCP header's fixed fields, once its length is checked (both the general decoder and the
// common frame's fast path).
[[gnu::always_inline]] inline void tcp_fields(const uint8_t* t, uint32_t payload_bytes,
                                              ParsedPacket& out) {
  // Both ports in one store: make_parsed_key() reads them as one 32-bit word, and a load that
  // spans two smaller stores is not forwarded from them (it waits until both reach the cache).
  static_assert(offsetof(ParsedPacket, dport) == offsetof(ParsedPacket, sport) + 2);
  const uint16_t ports[2] = {rd16(t), rd16(t + 2)};
  std::memcpy(&out.sport, ports, sizeof ports);
  out.seq = rd32(t + 4);
  out.ack = rd32(t + 8);
  out.flags = t[13];
  out.window = rd16(t + 14);
  out.payload_len = payload_bytes;
}

// `off` is where the TCP header starts; `ip_payload_bytes` is what the IP header says follows it.
inline Drop parse_tcp(const uint8_t* data, uint32_t caplen, uint32_t off, uint32_t ip_payload_bytes,
                      ParsedPacket& out) {
  if (ip_payload_bytes < kTcpMinHeaderBytes) return Drop::kBadTcpHeader;
  if (caplen < off || caplen - off < kTcpMinHeaderBytes) return Drop::kTruncatedTcp;
  const uint8_t* t = data + off;
  const uint32_t hdr_bytes = static_cast<uint32_t>(t[12] >> 4) * 4;
  if (hdr_bytes < kTcpMinHeaderBytes || hdr_bytes > ip_payload_bytes) return Drop::kBadTcpHeader;
  if (caplen - off < hdr_bytes) return Drop::kTruncatedTcp;
  // A malformed option (length past the header, or < 2) ends option parsing but keeps the
  // segment: old stacks sent such SYN-ACKs (tcptrace long_rtt.dmp) and the handshake matters more
  // than the option. The worker counts these as tcp_option_errors.
  out.opt.malformed = parse_tcp_options(t, hdr_bytes, out.opt) != Drop::kNone;
  tcp_fields(t, ip_payload_bytes - hdr_bytes, out);
  return Drop::kNone;
}

inline Drop parse_ipv4(const uint8_t* data, uint32_t caplen, uint32_t wire_len, uint32_t off,
                       ParsedPacket& out) {
  if (caplen - off < kIpv4MinHeaderBytes) return Drop::kTruncatedIp;
  const uint8_t* ip = data + off;
  if ((ip[0] >> 4) != 4) return Drop::kBadIpHeader;
  const uint32_t hdr_bytes = static_cast<uint32_t>(ip[0] & 0x0f) * 4;
  if (hdr_bytes < kIpv4MinHeaderBytes) return Drop::kBadIpHeader;
  uint32_t total_bytes = rd16(ip + 2);
  // Total length 0 is what a capture of a TSO/GSO super-segment shows (the NIC fills it in
  // later); the frame length is then the only length there is, as Wireshark assumes too.
  if (total_bytes == 0) total_bytes = wire_len - off;
  // A frame longer on the wire than the IP datagram is padding; a datagram longer than the frame
  // is impossible, unless the file lost the original length (caplen == wire_len: some old
  // converters wrote the snap length there), where the IP header is the only truth left.
  if (total_bytes < hdr_bytes || (total_bytes > wire_len - off && caplen < wire_len)) {
    return Drop::kBadIpHeader;
  }
  if (caplen - off < hdr_bytes) return Drop::kTruncatedIp;
  if ((rd16(ip + 6) & kIpv4FragOffsetMask) != 0) return Drop::kIpFragment;
  if (ip[9] != kProtoTcp) return Drop::kNotTcp;
  out.ip_version = 4;
  out.ip_id = rd16(ip + 4);
  out.src = IpAddr::from_v4(ip + 12);
  out.dst = IpAddr::from_v4(ip + 16);
  return parse_tcp(data, caplen, off + hdr_bytes, total_bytes - hdr_bytes, out);
}

inline Drop parse_ipv6(const uint8_t* data, uint32_t caplen, uint32_t wire_len, uint32_t off,
                       ParsedPacket& out) {
  if (caplen - off < kIpv6HeaderBytes) return Drop::kTruncatedIp;
  const uint8_t* ip = data + off;
  if ((ip[0] >> 4) != 6) return Drop::kBadIpHeader;
  const uint32_t room_bytes = wire_len - off - kIpv6HeaderBytes;
  uint32_t remaining = rd16(ip + 4);
  // Payload length 0: a jumbogram or a captured GSO super-segment (BIG TCP); the frame length
  // is the only length there is.
  if (remaining == 0) remaining = room_bytes;
  if (remaining > room_bytes && caplen < wire_len) return Drop::kBadIpHeader;  // see parse_ipv4
  uint8_t nh = ip[6];
  uint32_t pos = off + kIpv6HeaderBytes;
  // Each pass consumes at least 8 bytes of `remaining`, so the loop ends.
  while (nh != kProtoTcp) {
    uint32_t ext_bytes = 0;
    if (is_v6_generic_ext(nh)) {
      if (caplen - pos < 2) return Drop::kTruncatedIp;
      ext_bytes = (static_cast<uint32_t>(data[pos + 1]) + 1) * 8;
    } else if (nh == kV6Auth) {
      if (caplen - pos < 2) return Drop::kTruncatedIp;
      ext_bytes = (static_cast<uint32_t>(data[pos + 1]) + 2) * 4;
    } else if (nh == kV6Fragment) {
      if (caplen - pos < kV6FragmentHeaderBytes) return Drop::kTruncatedIp;
      ext_bytes = kV6FragmentHeaderBytes;
    } else {
      return Drop::kNotTcp;  // ESP, no-next-header, UDP, ICMPv6, ...
    }
    if (ext_bytes > remaining) return Drop::kBadIpHeader;
    if (caplen - pos < ext_bytes) return Drop::kTruncatedIp;
    if (nh == kV6Fragment && (rd16(data + pos + 2) >> 3) != 0) return Drop::kIpFragment;
    nh = data[pos];
    pos += ext_bytes;
    remaining -= ext_bytes;
  }
  out.ip_version = 6;
  out.ip_id = 0;
  out.src = IpAddr::from_v6(ip + 8);
  out.dst = IpAddr::from_v6(ip + 24);
  return parse_tcp(data, caplen, pos, remaining, out);
}

inline Drop parse_by_version(const uint8_t* data, uint32_t caplen, uint32_t wire_len, uint32_t off,
                             ParsedPacket& out) {
  if (caplen - off < 1) return Drop::kTruncatedIp;
  switch (data[off] >> 4) {
    case 4:
      return parse_ipv4(data, caplen, wire_len, off, out);
    case 6:
      return parse_ipv6(data, caplen, wire_len, off, out);
    default:
      return Drop::kBadIpHeader;
  }
}

inline Drop parse_by_ethertype(const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                               uint32_t off, uint16_t ethertype, ParsedPacket& out) {
  const Drop d = skip_vlan_tags(data, caplen, off, ethertype, out);
  if (d != Drop::kNone) return d;
  switch (ethertype) {
    case kEtherIpv4:
      return parse_ipv4(data, caplen, wire_len, off, out);
    case kEtherIpv6:
      return parse_ipv6(data, caplen, wire_len, off, out);
    default:
      return Drop::kNotIp;
  }
}

// LINKTYPE_NULL and LOOP: the 4-byte address family, then the IP packet. A NULL header is in the
// byte order of the host that captured, which the file does not say: the families are below 256,
// so a value with its high half set was written by a host of the other order. Checks the header
// and that the family agrees with the packet's version nibble; the packet itself is then decoded
// as raw IP (parse_frame() shares that call, so the common frame's code is laid out as before).
inline Drop check_loopback_header(const uint8_t* data, uint32_t caplen, bool network_order) {
  if (caplen < kNullHeaderBytes) return Drop::kTruncatedL2;
  uint32_t family = network_order ? rd32(data) : rd32le(data);
  if (!network_order && (family & 0xffff0000u) != 0) family = rd32(data);
  uint8_t version = 0;
  switch (family) {
    case kBsdAfInet:
      version = 4;
      break;
    case kBsdAfInet6Bsd:
    case kBsdAfInet6FreeBsd:
    case kBsdAfInet6Darwin:
      version = 6;
      break;
    default:
      return Drop::kNotIp;
  }
  if (caplen > kNullHeaderBytes && (data[kNullHeaderBytes] >> 4) != version) {
    return Drop::kBadIpHeader;
  }
  return Drop::kNone;
}

// The common frame: Ethernet, then IPv4 without options, then TCP. The caller has checked that
// the three minimal headers are captured (caplen >= 54) and that caplen <= wire_len. Returns
// false when the frame has another shape or would fail any check: the general decoder then
// decides. When it returns true, `out` holds what the general decoder gives (the same checks,
// made once at fixed offsets, with no walk over tags and link types).
inline bool parse_eth_ipv4_tcp(const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                               ParsedPacket& out) {
  const uint8_t* ip = data + kEthHeaderBytes;
  const uint8_t* t = ip + kIpv4MinHeaderBytes;
  if (rd16(data + 12) != kEtherIpv4 || ip[0] != 0x45 || ip[9] != kProtoTcp ||
      (rd16(ip + 6) & kIpv4FragOffsetMask) != 0) {
    return false;
  }
  // Total length 0 (a GSO super-segment) and every length the general decoder rejects go there.
  const uint32_t total_bytes = rd16(ip + 2);
  if (total_bytes < kIpv4MinHeaderBytes + kTcpMinHeaderBytes) return false;
  if (total_bytes > wire_len - kEthHeaderBytes && caplen < wire_len) return false;
  const uint32_t ip_payload_bytes = total_bytes - kIpv4MinHeaderBytes;
  const uint32_t hdr_bytes = static_cast<uint32_t>(t[12] >> 4) * 4;
  if (hdr_bytes < kTcpMinHeaderBytes || hdr_bytes > ip_payload_bytes ||
      caplen - (kEthHeaderBytes + kIpv4MinHeaderBytes) < hdr_bytes) {
    return false;
  }
  out.ip_version = 4;
  out.ip_id = rd16(ip + 4);
  out.src = IpAddr::from_v4(ip + 12);
  out.dst = IpAddr::from_v4(ip + 16);
  if (hdr_bytes > kTcpMinHeaderBytes) {
    out.opt.malformed = parse_tcp_options(t, hdr_bytes, out.opt) != Drop::kNone;
  }
  tcp_fields(t, ip_payload_bytes - hdr_bytes, out);
  return true;
}

// Every link type the decoder reads, after the common frame's fast path (parse_frame()).
inline Drop parse_link(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                       ParsedPacket& out) {
  uint32_t raw_ip_at = 0;  // where a raw IP packet starts: after a loopback header, or at 0
  switch (link) {
    case LinkType::kEthernet:
      if (caplen < kEthHeaderBytes) return Drop::kTruncatedL2;
      return parse_by_ethertype(data, caplen, wire_len, kEthHeaderBytes, rd16(data + 12), out);
    case LinkType::kLinuxSll:
      if (caplen < kSllHeaderBytes) return Drop::kTruncatedL2;
      return parse_by_ethertype(data, caplen, wire_len, kSllHeaderBytes,
                                rd16(data + kSllProtocolOffset), out);
    case LinkType::kLinuxSll2:
      if (caplen < kSll2HeaderBytes) return Drop::kTruncatedL2;
      return parse_by_ethertype(data, caplen, wire_len, kSll2HeaderBytes,
                                rd16(data + kSll2ProtocolOffset), out);
    case LinkType::kNull:
    case LinkType::kLoop: {
      const Drop d = check_loopback_header(data, caplen, link == LinkType::kLoop);
      if (d != Drop::kNone) return d;
      raw_ip_at = kNullHeaderBytes;
      [[fallthrough]];
    }
    case LinkType::kRaw:
      return parse_by_version(data, caplen, wire_len, raw_ip_at, out);
    case LinkType::kIpv4:
      return parse_ipv4(data, caplen, wire_len, 0, out);
    case LinkType::kIpv6:
      return parse_ipv6(data, caplen, wire_len, 0, out);
  }
  return Drop::kUnsupportedLink;
}

constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoGre = 47;
constexpr uint32_t kUdpHeaderBytes = 8;
constexpr uint16_t kVxlanPort = 4789;
constexpr uint16_t kGenevePort = 6081;
constexpr uint32_t kVxlanHeaderBytes = 8;
constexpr uint32_t kGeneveHeaderBytes = 8;
constexpr uint16_t kEtherTransparentBridging = 0x6558;  // Ethernet inside GRE or Geneve
constexpr uint16_t kEtherErspan2 = 0x88be;              // ERSPAN type I (no sequence) and II
constexpr uint16_t kEtherErspan3 = 0x22eb;
constexpr uint32_t kErspan2HeaderBytes = 8;
constexpr uint32_t kErspan3HeaderBytes = 12;
constexpr uint32_t kErspan3SubheaderBytes = 8;  // present when the O flag is set
constexpr uint16_t kGreChecksum = 0x8000;
constexpr uint16_t kGreRouting = 0x4000;
constexpr uint16_t kGreKey = 0x2000;
constexpr uint16_t kGreSequence = 0x1000;

// What a Geneve or GRE protocol type field says is inside: Ethernet, or IP; false for others.
inline bool inner_link_of(uint16_t type, LinkType& link) {
  if (type == kEtherTransparentBridging) {
    link = LinkType::kEthernet;
  } else if (type == kEtherIpv4 || type == kEtherIpv6) {
    link = LinkType::kRaw;
  } else {
    return false;
  }
  return true;
}

}  // namespace

// The outer frame was IP carrying something other than TCP: if it is a tunnel `decap` asks for,
// where the frame inside starts and its link type. Out of line and cold, with its own short walk
// over the link header: no common frame comes here, and the decoder's inline code keeps the call
// sites it has without tunnels (a second call site of an inline decoder changed what the
// optimizer inlined and cost the worker 12-15 %, docs/results/dataplane_bench.md).
[[gnu::noinline, gnu::cold]] static bool tunnel_payload(LinkType link, const uint8_t* data,
                                                        uint32_t caplen, uint8_t decap,
                                                        uint32_t& inner, LinkType& inner_link) {
  // Where the outer IP header is: after the link header and its VLAN tags (walked here rather
  // than by skip_vlan_tags(), for the call-site reason above).
  uint32_t off = 0;
  switch (link) {
    case LinkType::kEthernet:
    case LinkType::kLinuxSll:
    case LinkType::kLinuxSll2: {
      const uint32_t type_at = link == LinkType::kEthernet   ? 12
                               : link == LinkType::kLinuxSll ? kSllProtocolOffset
                                                             : kSll2ProtocolOffset;
      off = link == LinkType::kEthernet   ? kEthHeaderBytes
            : link == LinkType::kLinuxSll ? kSllHeaderBytes
                                          : kSll2HeaderBytes;
      if (caplen < off) return false;
      uint16_t ethertype = rd16(data + type_at);
      for (int tags = 0; is_vlan_tpid(ethertype); ++tags) {
        if (tags == 4 || caplen - off < kVlanTagBytes) return false;
        ethertype = rd16(data + off + 2);
        off += kVlanTagBytes;
      }
      if (ethertype != kEtherIpv4 && ethertype != kEtherIpv6) return false;
      break;
    }
    case LinkType::kNull:
    case LinkType::kLoop:
      off = kNullHeaderBytes;
      break;
    case LinkType::kRaw:
    case LinkType::kIpv4:
    case LinkType::kIpv6:
      break;
  }
  // The outer IP header (no IPv6 extension headers before the tunnel) and what follows it.
  if (caplen <= off) return false;
  const uint8_t* ip = data + off;
  uint8_t proto = 0;
  uint32_t l4 = 0;
  if ((ip[0] >> 4) == 4 && caplen - off >= kIpv4MinHeaderBytes) {
    proto = ip[9];
    l4 = off + static_cast<uint32_t>(ip[0] & 0x0f) * 4;
  } else if ((ip[0] >> 4) == 6 && caplen - off >= kIpv6HeaderBytes) {
    proto = ip[6];
    l4 = off + kIpv6HeaderBytes;
  } else {
    return false;
  }
  if (l4 >= caplen) return false;
  const uint8_t* h = data + l4;
  const uint32_t room = caplen - l4;
  inner_link = LinkType::kEthernet;
  if (proto == kProtoUdp && room >= kUdpHeaderBytes) {
    const uint16_t dport = rd16(h + 2);
    if ((decap & kDecapVxlan) && dport == kVxlanPort &&
        room >= kUdpHeaderBytes + kVxlanHeaderBytes && (h[kUdpHeaderBytes] & 0x08)) {
      inner = l4 + kUdpHeaderBytes + kVxlanHeaderBytes;  // the I flag: a valid VNI follows
    } else if ((decap & kDecapGeneve) && dport == kGenevePort &&
               room >= kUdpHeaderBytes + kGeneveHeaderBytes && (h[kUdpHeaderBytes] >> 6) == 0) {
      const uint8_t* g = h + kUdpHeaderBytes;
      inner = l4 + kUdpHeaderBytes + kGeneveHeaderBytes + static_cast<uint32_t>(g[0] & 0x3f) * 4;
      if (!inner_link_of(rd16(g + 2), inner_link)) return false;
    } else {
      return false;
    }
  } else if (proto == kProtoGre && room >= 4 && (decap & (kDecapErspan | kDecapGre))) {
    const uint16_t flags = rd16(h);
    const uint16_t type = rd16(h + 2);
    if ((flags & 0x0007) != 0 || (flags & kGreRouting) != 0) return false;  // version 0
    inner = l4 + 4 + ((flags & kGreChecksum) ? 4 : 0) + ((flags & kGreKey) ? 4 : 0) +
            ((flags & kGreSequence) ? 4 : 0);
    if (type == kEtherErspan2 && (decap & kDecapErspan)) {
      // Type II has the sequence number and an 8-byte header; type I has neither.
      if (flags & kGreSequence) inner += kErspan2HeaderBytes;
    } else if (type == kEtherErspan3 && (decap & kDecapErspan)) {
      if (caplen < inner + kErspan3HeaderBytes) return false;
      const bool subheader = (data[inner + kErspan3HeaderBytes - 1] & 0x01) != 0;  // the O flag
      inner += kErspan3HeaderBytes + (subheader ? kErspan3SubheaderBytes : 0);
    } else if (!(decap & kDecapGre) || !inner_link_of(type, inner_link)) {
      return false;
    }
  } else {
    return false;
  }
  return inner < caplen;
}

Drop parse_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                 uint64_t ts_ns, ParsedPacket& out, uint8_t decap) {
  // A second pass decodes the frame inside a tunnel (at most one: `decap` is then 0).
  for (;;) {
    // Only what a successful decode may leave unwritten is reset (tags, options); every other field
    // is written on the way to Drop::kNone. Resetting the whole struct cost ~40% of the call.
    // After a drop, `out` holds no meaningful values.
    out.vlan_outer = 0;
    out.vlan_inner = 0;
    out.opt = TcpOptions{};
    // A record claiming fewer bytes on the wire than it captured is malformed; the captured bytes
    // did exist, so trust them. From here on caplen <= wire_len, which the IP checks rely on.
    if (wire_len < caplen) wire_len = caplen;
    out.ts_ns = ts_ns;
    out.wire_len = wire_len;
    if (data == nullptr) caplen = 0;
    if (link == LinkType::kEthernet &&
        caplen >= kEthHeaderBytes + kIpv4MinHeaderBytes + kTcpMinHeaderBytes &&
        parse_eth_ipv4_tcp(data, caplen, wire_len, out)) {
      return Drop::kNone;
    }
    const Drop d = parse_link(link, data, caplen, wire_len, out);
    if (d != Drop::kNotTcp || decap == 0) [[likely]] {
      return d;
    }
    uint32_t inner = 0;
    if (!tunnel_payload(link, data, caplen, decap, inner, link)) return d;
    data += inner;
    caplen -= inner;
    wire_len -= inner;
    decap = 0;
  }
}

const char* drop_name(Drop d) {
  switch (d) {
    case Drop::kNone:
      return "none";
    case Drop::kUnsupportedLink:
      return "unsupported_link";
    case Drop::kTruncatedL2:
      return "truncated_l2";
    case Drop::kNotIp:
      return "not_ip";
    case Drop::kTruncatedIp:
      return "truncated_ip";
    case Drop::kBadIpHeader:
      return "bad_ip_header";
    case Drop::kIpFragment:
      return "ip_fragment";
    case Drop::kNotTcp:
      return "not_tcp";
    case Drop::kTruncatedTcp:
      return "truncated_tcp";
    case Drop::kBadTcpHeader:
      return "bad_tcp_header";
    case Drop::kBadTcpOption:
      return "bad_tcp_option";
    case Drop::kFlowTableFull:
      return "flow_table_full";
    case Drop::kCount:
      break;
  }
  return "unknown";
}

}  // namespace spand
