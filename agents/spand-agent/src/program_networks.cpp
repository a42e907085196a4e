#include "program_networks.hpp"

#include <algorithm>
#include <cstring>

namespace spand::agent {

void ProgramNetworks::mark(const Prefix& policy_prefix, spand_policy& value) const {
  if (!per_policy) return;
  const uint32_t fixed = policy_prefix.v4 ? v4_len : v6_len;
  // The same network as the fixed one: the program's own key already names it, and a shared
  // window keeps needing no socket state (the flag says it was counted, the fixed key where).
  if (policy_prefix.len_bits == fixed) return;
  value.flags |= SPAND_POLICY_OWN_NET;
  value.net_len = policy_prefix.mapped_len_bits();
}

Prefix ProgramNetworks::of_key(const spand_active_key& key) {
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  Prefix p;
  std::memcpy(p.addr.data(), key.data, 16);
  const uint32_t len = std::min<uint32_t>(key.len, 128);
  // An IPv4 network is one whose length reaches past the mapped prefix (96 bits) and whose
  // address is in it; a /96 or shorter of the IPv6 space stays IPv6.
  p.v4 = len >= 96 && std::memcmp(key.data, kV4Mapped, sizeof(kV4Mapped)) == 0;
  p.len_bits = static_cast<uint8_t>(p.v4 ? len - 96 : len);
  return p.truncated(p.len_bits);
}

}  // namespace spand::agent
