// libFuzzer target: the frame decoder (gateway/dataplane/parse.cpp) on one frame.
// Input: byte 0 picks the link type (kLinks[b % 8]) and whether the wire length exceeds the
// capture (b & 0x80: a snap-length cut of up to 4095 bytes, the length in byte 1) and whether
// every tunnel is opened (b & 0x10, parse.hpp's DecapFlag); the rest is
// the frame, in a buffer of exactly its size (ASan sees any read past caplen).
// Properties: a decoded segment is IPv4 (with IPv4 addresses) or IPv6, at most 4 SACK blocks,
// a payload no longer than the IP header allows; decoding is deterministic.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/parse.hpp"
#include "fuzz_check.hpp"

using namespace spand;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const LinkType link = fuzz::kLinks[data[0] % fuzz::kLinkCount];
  const uint32_t cut = data[0] & 0x80 ? (uint32_t(data[1]) << 4) | (data[0] & 0x0f) : 0;
  const std::vector<uint8_t> frame(data + 2, data + size);
  const uint32_t caplen = uint32_t(frame.size());
  const uint8_t decap = (data[0] & 0x10) ? kDecapAll : 0;
  ParsedPacket a, b;
  const Drop da = parse_frame(link, frame.data(), caplen, caplen + cut, 1000, a, decap);
  const Drop db = parse_frame(link, frame.data(), caplen, caplen + cut, 1000, b, decap);
  FUZZ_CHECK(da == db);
  FUZZ_CHECK(da < Drop::kCount);
  if (da != Drop::kNone) return 0;
  FUZZ_CHECK(std::memcmp(&a.src, &b.src, sizeof a.src) == 0 && a.seq == b.seq &&
             a.payload_len == b.payload_len && a.flags == b.flags);
  FUZZ_CHECK(a.ip_version == 4 || a.ip_version == 6);
  FUZZ_CHECK(a.ip_version == 6 || (a.src.is_v4() && a.dst.is_v4()));
  FUZZ_CHECK(a.opt.sack_count <= 4);
  FUZZ_CHECK(a.payload_len <= 65535);  // a 16-bit IP length minus the headers
  // A segment inside a tunnel is as long as the inner frame.
  FUZZ_CHECK(decap ? a.wire_len <= caplen + cut : a.wire_len == caplen + cut);
  return 0;
}
