// The project's one parser of address and prefix text ("198.51.100.7", "2001:db8::1",
// "198.51.100.0/24", "2001:db8::/48"): every option, file line, request and Redis key that holds
// one, in the gateway (its service, estimates, prefix map and --inside) and in the agent, goes
// through parse_ip_text. Each caller keeps its own rules on top (a length required, host bits
// refused, the store's length) and its own messages; the syntax is decided here once. Also the
// agent's prefix type. The gateway's data plane keeps its own Prefix (dataplane/prefix.hpp, the
// layout its tables hash), built from what this parser returns by the code above it.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spand::net {

// What is wrong with a text, in the order it is checked.
enum class IpTextError : uint8_t {
  kNone,
  kBadLength,         // after the '/': not 1 to 3 decimal digits
  kBadAddress,        // before it: not an IPv4 or IPv6 address (a NUL included)
  kLengthOutOfRange,  // above 32 for an address written as IPv4, 128 for one written as IPv6
};

// The pieces of "address[/length]".
struct IpText {
  std::array<uint8_t, 16> addr{};  // IPv4 stored IPv4-mapped (::ffff:a.b.c.d), host bits kept
  bool v4 = false;                 // written as IPv4 ("::ffff:198.51.100.7" is written as IPv6)
  bool has_len = false;            // a '/' was there
  unsigned len = 0;                // the length written, or the family's full length without one
  std::string_view addr_text;      // the part before the '/' (all of the text without one)
  std::string_view len_text;       // the part after it
};

// The whole text must be an address, optionally followed by '/' and its length. Fills `out` as
// far as it got (so a caller can name the part that is wrong) and returns the first error.
IpTextError parse_ip_text(std::string_view text, IpText& out);

// The address as text: dotted quad for an IPv4 (IPv4-mapped) address, RFC 5952 form for IPv6.
std::string format_ip(const std::array<uint8_t, 16>& addr, bool v4);

// An IPv4 or IPv6 network prefix, as the agent keys estimates and kernel policies.
struct IpPrefix {
  // IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) so one type and one BPF trie serve both.
  std::array<uint8_t, 16> addr{};
  uint8_t len_bits = 0;  // length within the family: 0..32 for IPv4, 0..128 for IPv6
  bool v4 = true;

  auto operator<=>(const IpPrefix&) const = default;

  // "198.51.100.0/24", "2001:db8::/48"; a bare address gets the full length. Host bits are
  // cleared. nullopt when parse_ip_text refuses the text.
  static std::optional<IpPrefix> parse(std::string_view text);
  // The prefix of `len_bits` containing this address (host bits cleared).
  IpPrefix truncated(uint8_t len_bits) const;
  // Bits in the IPv4-mapped IPv6 space: len_bits + 96 for IPv4.
  uint32_t mapped_len_bits() const { return v4 ? len_bits + 96u : len_bits; }
  std::string str() const;
  std::string addr_str() const;
};

}  // namespace spand::net
