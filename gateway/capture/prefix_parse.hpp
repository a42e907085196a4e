// The data plane's Prefix from text ("198.51.100.0/24", "2001:db8::/32", a bare address), for
// --inside and the prefix map's lines: the project's one parser (common/net/ip_prefix.hpp) into
// the layout the data plane's tables use. The service's request addresses and the Redis keys use
// the same parser with rules of their own (service/address.cpp, estimates/redis_schema.cpp).
#pragma once

#include <string_view>

#include "dataplane/prefix.hpp"
#include "net/ip_prefix.hpp"

namespace spand {

// Without a length the address's full length is used; host bits are cleared. False on anything
// net::parse_ip_text refuses (a length out of range included), with the reason in `why`.
bool parse_prefix(std::string_view text, Prefix& out, net::IpTextError* why = nullptr);

// The same, and true in `host_bits` when the text had bits set below its length.
bool parse_prefix(std::string_view text, Prefix& out, bool& host_bits);

}  // namespace spand
