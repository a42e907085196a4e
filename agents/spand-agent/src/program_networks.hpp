// The client networks the sock_ops program keys its own counts by (prefix_active, first windows
// in flight; prefix_rate, ACK-train rates): the agent's fixed prefix_len_v4/v6 network, or with a
// prefix map the prefix of the policy that applied to the socket (SPAND_POLICY_OWN_NET in the
// policy, net_len its length), so that every first window under a map's /16 shares one count.
// Plain code on spand_maps.h's structs, unit-tested without a kernel.
#pragma once

#include <cstdint>

#include "prefix.hpp"
#include "spand_maps.h"

namespace spand::agent {

struct ProgramNetworks {
  uint32_t v4_len = 24;  // the fixed network (prefix_len_v4/v6)
  uint32_t v6_len = 48;
  // A prefix map is in use: a policy whose prefix is not the fixed network counts its sockets
  // under its own prefix. Off (no map): every count is per fixed network, as the program was
  // built before.
  bool per_policy = false;

  // Marks `value` (the policy for `policy_prefix`) with SPAND_POLICY_OWN_NET and its net_len when
  // its sockets count under its own prefix; leaves it as is otherwise.
  void mark(const Prefix& policy_prefix, spand_policy& value) const;
  // The network a prefix_rate (or prefix_active) key names: its IPv4-mapped address and length.
  static Prefix of_key(const spand_active_key& key);
};

}  // namespace spand::agent
