// The prefix key of estimates and kernel policies: the project's one IPv4-mapped prefix type and
// its parser, shared with the gateway (common/net/ip_prefix.hpp).
#pragma once

#include "net/ip_prefix.hpp"

namespace spand::agent {

using Prefix = net::IpPrefix;

}  // namespace spand::agent
