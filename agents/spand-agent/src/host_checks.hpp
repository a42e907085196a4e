// The host the agent runs on: its privileges, its cgroup2 mount, its kernel's HZ and congestion
// controls. Read once at start (available_congestion_controls() again after a registration).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "config.hpp"

namespace spand::agent {

// A real run needs CAP_NET_ADMIN, and CAP_BPF or CAP_SYS_ADMIN in BPF mode; a dry run needs
// nothing. Returns kExitPrivileges (after saying what is missing) when they are not there.
std::optional<int> check_privileges(const AgentConfig& cfg);

// Fills what the configuration left to the host: the cgroup (the first cgroup2 mount) and the
// kernel's HZ (without it the SYN RTO is not seeded, said on stderr).
void complete_from_host(AgentConfig& cfg);

// /proc/sys/net/ipv4/tcp_available_congestion_control.
std::set<std::string> available_congestion_controls();

}  // namespace spand::agent
