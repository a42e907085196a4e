// Frame decoder: link layer (Ethernet, 802.1Q, QinQ, Linux SLL/SLL2, raw IP, BSD loopback), IPv4
// (options, fragments), IPv6 (extension headers) and TCP (options). Lengths come from the IP header
// so a snap-length-cut capture still yields the true payload length.
#pragma once

#include "dataplane/packet.hpp"

namespace spand {

// Tunnels a mirrored packet may arrive in (remote span), opened when asked (spand-gateway
// --decap): the frame inside is decoded in place of the outer one, which is not tracked.
enum DecapFlag : uint8_t {
  kDecapVxlan = 1 << 0,   // UDP port 4789 (RFC 7348): AWS and Azure traffic mirroring
  kDecapGeneve = 1 << 1,  // UDP port 6081 (RFC 8926), Ethernet or IP inside
  kDecapErspan = 1 << 2,  // GRE 0x88be (ERSPAN type I and II) and 0x22eb (type III): remote span
  kDecapGre = 1 << 3,     // GRE carrying Ethernet (0x6558), IPv4 or IPv6
  kDecapAll = kDecapVxlan | kDecapGeneve | kDecapErspan | kDecapGre,
};

// Decodes one frame. Returns Drop::kNone and fills `out` when the frame is a TCP segment we can
// track; otherwise returns the reason. Never reads past data + caplen, never allocates.
// `decap` (DecapFlag bits): a frame whose TCP is inside one of these tunnels is decoded from the
// inner frame (one level; tags and addresses are the inner frame's); a tunnel header cut short
// or malformed leaves the frame as it was (not_tcp).
Drop parse_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                 uint64_t ts_ns, ParsedPacket& out, uint8_t decap = 0);

}  // namespace spand
