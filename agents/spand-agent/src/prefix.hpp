// An IPv4 or IPv6 network prefix, the key estimates and kernel policies are stored under.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spand::agent {

struct Prefix {
  // IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) so one type and one BPF trie serve both.
  std::array<uint8_t, 16> addr{};
  uint8_t len_bits = 0;  // length within the family: 0..32 for IPv4, 0..128 for IPv6
  bool v4 = true;

  auto operator<=>(const Prefix&) const = default;

  // "198.51.100.0/24", "2001:db8::/48"; a bare address gets the full length. Host bits are
  // cleared. nullopt when unparseable or the length is out of range.
  static std::optional<Prefix> parse(std::string_view text);
  // The prefix of `len_bits` containing this address (host bits cleared).
  Prefix truncated(uint8_t len_bits) const;
  // Bits in the IPv4-mapped IPv6 space: len_bits + 96 for IPv4.
  uint32_t mapped_len_bits() const { return v4 ? len_bits + 96u : len_bits; }
  std::string str() const;
  std::string addr_str() const;
};

}  // namespace spand::agent
