// Frame decoder: link layer (Ethernet, 802.1Q, QinQ, Linux SLL/SLL2, raw IP, BSD loopback), IPv4
// (options, fragments), IPv6 (extension headers) and TCP (options). Lengths come from the IP header
// so a snap-length-cut capture still yields the true payload length.
#pragma once

#include "dataplane/packet.hpp"

namespace spand {

// Decodes one frame. Returns Drop::kNone and fills `out` when the frame is a TCP segment we can
// track; otherwise returns the reason. Never reads past data + caplen, never allocates.
Drop parse_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                 uint64_t ts_ns, ParsedPacket& out);

}  // namespace spand
