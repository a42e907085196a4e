// The data plane's Prefix from text (capture/prefix_parse.cpp, for --inside and --prefix-map)
// agrees with the project's other prefix type, net::IpPrefix (common/net/ip_prefix.hpp, the
// agent's), on every text both take; where they differ is an IPv4-mapped address written as
// IPv6, which the data plane reads as IPv4 (as the service does) and IpPrefix keeps as IPv6.
#include "capture/prefix_parse.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "net/ip_prefix.hpp"

namespace spand {
namespace {

TEST(PrefixParse, AgreesWithIpPrefix) {
  struct Case {
    const char* text;
    const char* want;  // Prefix::to_string(), by hand
  };
  const Case cases[] = {
      {"198.51.100.0/24", "198.51.100.0/24"},
      {"198.51.100.77/24", "198.51.100.0/24"},
      {"198.51.100.7", "198.51.100.7/32"},
      {"0.0.0.0/0", "0.0.0.0/0"},
      {"10.1.2.3/9", "10.0.0.0/9"},
      {"2001:db8::/48", "2001:db8::/48"},
      {"2001:db8:1:2::5/48", "2001:db8:1::/48"},
      {"2001:db8::1", "2001:db8::1/128"},
      {"::/0", "::/0"},
  };
  for (const Case& c : cases) {
    Prefix p;
    ASSERT_TRUE(parse_prefix(c.text, p)) << c.text;
    EXPECT_EQ(p.to_string(), c.want) << c.text;
    const auto ip = net::IpPrefix::parse(c.text);
    ASSERT_TRUE(ip) << c.text;
    EXPECT_EQ(ip->str(), c.want) << c.text;
    EXPECT_EQ(std::memcmp(ip->addr.data(), p.net.bytes.data(), 16), 0) << c.text;
    EXPECT_EQ(ip->len_bits, p.len) << c.text;
    EXPECT_EQ(ip->v4, p.net.is_v4()) << c.text;
  }
}

TEST(PrefixParse, AnIpv4MappedAddressWrittenAsIpv6IsIpv4) {
  Prefix p;
  ASSERT_TRUE(parse_prefix("::ffff:198.51.100.7", p));
  EXPECT_EQ(p.to_string(), "198.51.100.7/32");
  ASSERT_TRUE(parse_prefix("::ffff:198.51.100.0/24", p));  // an IPv4 length, as the service
  EXPECT_EQ(p.to_string(), "198.51.100.0/24");
  // An IPv6 length on a mapped address: out of range (it was clamped to a /32 without a word).
  net::IpTextError why = net::IpTextError::kNone;
  EXPECT_FALSE(parse_prefix("::ffff:198.51.100.0/120", p, &why));
  EXPECT_EQ(why, net::IpTextError::kLengthOutOfRange);
  EXPECT_FALSE(parse_prefix("::ffff:0.0.0.0/96", p));
  // IpPrefix keeps the family as written: the agent's BPF trie has IPv6 lengths for both.
  EXPECT_EQ(net::IpPrefix::parse("::ffff:198.51.100.0/120")->str(), "::ffff:198.51.100.0/120");
}

TEST(PrefixParse, RefusesWhatTheParserRefuses) {
  Prefix p;
  for (const char* bad :
       {"", "198.51.100.0/33", "2001:db8::/129", "198.51.100.0/", "x/24", "198.51.100.0/24/1"})
    EXPECT_FALSE(parse_prefix(bad, p)) << bad;
}

}  // namespace
}  // namespace spand
