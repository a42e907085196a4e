// Parsed view of one captured frame: the fields the flow table and the TCP tracker need.
// Filled by parse_frame() (parse.cpp); never allocates, never throws.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace spand {

// Link types we decode, numbered as libpcap's DLT_/LINKTYPE_ values so a pcap header maps 1:1.
enum class LinkType : uint16_t {
  kNull = 0,        // LINKTYPE_NULL: BSD/macOS loopback (address family, capturing host order)
  kEthernet = 1,    // LINKTYPE_ETHERNET
  kRaw = 101,       // LINKTYPE_RAW (IPv4 or IPv6 by version nibble)
  kLoop = 108,      // LINKTYPE_LOOP: OpenBSD loopback (address family, network order)
  kLinuxSll = 113,  // LINKTYPE_LINUX_SLL
  kIpv4 = 228,      // LINKTYPE_IPV4
  kIpv6 = 229,      // LINKTYPE_IPV6
  kLinuxSll2 = 276  // LINKTYPE_LINUX_SLL2
};

// Why a frame was not handed to the flow table. Each has a counter; names are the metric labels.
enum class Drop : uint8_t {
  kNone = 0,
  kUnsupportedLink,  // link type we do not decode
  kTruncatedL2,      // capture ends inside the link-layer header
  kNotIp,            // ethertype / protocol is not IPv4 or IPv6 (ARP, LLDP, ...)
  kTruncatedIp,      // capture ends inside the IP header
  kBadIpHeader,      // version, IHL or total length inconsistent
  kIpFragment,       // non-first IPv4 fragment or IPv6 fragment with offset != 0
  kNotTcp,           // UDP, ICMP, ...
  kTruncatedTcp,     // capture ends inside the TCP header (options included)
  kBadTcpHeader,     // data offset < 5 or beyond the IP payload
  kBadTcpOption,     // unused as a drop: a bad option is counted (tcp_option_errors), not dropped
  kFlowTableFull,    // a new connection could not be inserted (see flow_table.hpp policy)
  kCount
};

const char* drop_name(Drop d);

// IPv4 addresses are stored as IPv4-mapped IPv6 (::ffff:a.b.c.d) so one key type serves both.
struct IpAddr {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const IpAddr& o) const { return word(0) == o.word(0) && word(1) == o.word(1); }
  // The address as two 64-bit words (host order of the bytes as stored): cheap compares.
  uint64_t word(int i) const {
    uint64_t w;
    std::memcpy(&w, bytes.data() + 8 * i, 8);
    return w;
  }
  bool is_v4() const {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(bytes.data(), kMapped, 12) == 0;
  }
  static IpAddr from_v4(const uint8_t* p) {
    IpAddr a;
    a.bytes[10] = 0xff;
    a.bytes[11] = 0xff;
    std::memcpy(a.bytes.data() + 12, p, 4);
    return a;
  }
  static IpAddr from_v6(const uint8_t* p) {
    IpAddr a;
    std::memcpy(a.bytes.data(), p, 16);
    return a;
  }
};

// TCP header flag bits as on the wire.
enum TcpFlag : uint8_t {
  kFin = 0x01,
  kSyn = 0x02,
  kRst = 0x04,
  kPsh = 0x08,
  kAck = 0x10,
  kUrg = 0x20,
  kEce = 0x40,
  kCwr = 0x80
};

struct SackBlock {
  uint32_t left;
  uint32_t right;
};

struct TcpOptions {
  uint16_t mss = 0;       // 0 = absent
  uint8_t wscale = 0xff;  // 0xff = absent
  bool sack_permitted = false;
  bool has_ts = false;
  uint32_t tsval = 0;
  uint32_t tsecr = 0;
  uint8_t sack_count = 0;  // blocks present (at most 4 fit in 40 option bytes)
  bool malformed = false;  // an option's length was invalid: options after it were skipped
  SackBlock sack[4]{};
};

struct ParsedPacket {
  uint64_t ts_ns = 0;       // capture timestamp
  uint32_t wire_len = 0;    // frame length on the wire
  uint16_t vlan_outer = 0;  // 0 = untagged; outer 802.1Q/802.1ad VID
  uint16_t vlan_inner = 0;  // inner VID for QinQ
  uint8_t ip_version = 0;   // 4 or 6
  uint16_t ip_id = 0;  // IPv4 identification field (0 for IPv6): tells a capture copy from a resend
  IpAddr src;
  IpAddr dst;
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;       // raw, unscaled
  uint32_t payload_len = 0;  // from the IP header, not the capture (snap length safe)
  TcpOptions opt;
};

}  // namespace spand
