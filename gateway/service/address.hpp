// Turns the text a client sends ("198.51.100.7", "2001:db8::1", "198.51.100.0/24") into the
// store's key: a prefix of the configured length. Shared by Get, BatchGet, Watch and Report. The
// syntax is the project's one parser's (common/net/ip_prefix.hpp); the rules on lengths and the
// messages for the client are the service's.
#pragma once

#include <string>
#include <string_view>

#include "dataplane/prefix.hpp"

namespace spand {

// An address maps to its configured prefix (IPv4 /24, IPv6 /48 by default). A CIDR as long as
// or longer than the configured length maps to the enclosing configured prefix; a shorter one
// (wider network) is rejected, since the store keeps nothing coarser than the configured
// length. False + a message for the client on any error.
bool parse_target(std::string_view text, const PrefixConfig& cfg, Prefix& out, std::string& error);

// The bare address (no length) of `text`, for Report samples; same syntax as parse_target.
bool parse_client_address(std::string_view text, const PrefixConfig& cfg, IpAddr& out,
                          std::string& error);

}  // namespace spand
