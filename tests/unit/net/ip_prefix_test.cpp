// The project's one address/prefix text parser (common/net/ip_prefix.cpp), which the gateway's
// --inside, prefix map, service requests and Redis keys and the agent's options all go through:
// what it accepts, what it refuses and why, IPv4-mapped storage, and the agent's prefix type.
#include "net/ip_prefix.hpp"

#include <gtest/gtest.h>

#include <string>

namespace spand::net {
namespace {

using E = IpTextError;

IpTextError parse(std::string_view text) {
  IpText t;
  return parse_ip_text(text, t);
}

TEST(IpText, AcceptsAddressesAndPrefixesOfBothFamilies) {
  IpText t;
  ASSERT_EQ(parse_ip_text("198.51.100.77", t), E::kNone);
  EXPECT_TRUE(t.v4);
  EXPECT_FALSE(t.has_len);
  EXPECT_EQ(t.len, 32u);  // a bare address has the family's full length
  // IPv4 is stored IPv4-mapped: ::ffff:198.51.100.77, host bits kept.
  const std::array<uint8_t, 16> mapped = {0, 0, 0,    0,    0,   0,  0,   0,
                                          0, 0, 0xff, 0xff, 198, 51, 100, 77};
  EXPECT_EQ(t.addr, mapped);

  ASSERT_EQ(parse_ip_text("2001:db8::1/48", t), E::kNone);
  EXPECT_FALSE(t.v4);
  EXPECT_TRUE(t.has_len);
  EXPECT_EQ(t.len, 48u);
  EXPECT_EQ(t.addr[0], 0x20);
  EXPECT_EQ(t.addr[1], 0x01);
  EXPECT_EQ(t.addr[15], 1);
  EXPECT_EQ(t.addr_text, "2001:db8::1");
  EXPECT_EQ(t.len_text, "48");

  // An IPv4-mapped address written as IPv6 has the same bytes but is IPv6 as written (its
  // length is checked against 128); callers that fold it into IPv4 (the gateway) do so themselves.
  ASSERT_EQ(parse_ip_text("::ffff:198.51.100.77/120", t), E::kNone);
  EXPECT_FALSE(t.v4);
  EXPECT_EQ(t.addr, mapped);

  for (const char* ok : {"0.0.0.0/0", "10.0.0.0/8", "10.0.0.0/032", "::/0", "::1", "2001:db8::/128",
                         "255.255.255.255/32"}) {
    EXPECT_EQ(parse(ok), E::kNone) << ok;
  }
}

TEST(IpText, RefusesWithTheFirstReason) {
  struct Case {
    std::string text;
    IpTextError why;
  };
  for (const Case& c : {
           Case{"", E::kBadAddress},
           Case{"x", E::kBadAddress},
           Case{"10.0.0", E::kBadAddress},  // inet_pton wants four parts
           Case{"10.0.0.0/8", E::kNone},
           Case{"10.0.0/8", E::kBadAddress},
           Case{"/24", E::kBadAddress},
           Case{" 10.0.0.0", E::kBadAddress},  // blanks are the caller's to trim
           Case{"10.0.0.0/", E::kBadLength},
           Case{"10.0.0.0/-1", E::kBadLength},
           Case{"10.0.0.0/+8", E::kBadLength},
           Case{"10.0.0.0/8x", E::kBadLength},
           Case{"10.0.0.0/0008", E::kBadLength},  // four digits
           Case{"10.0.0.0/8/8", E::kBadLength},
           Case{"nonsense/999", E::kBadAddress},  // the length's syntax first, then the address
           Case{"nonsense/1x", E::kBadLength},
           Case{"10.0.0.0/33", E::kLengthOutOfRange},
           Case{"2001:db8::/129", E::kLengthOutOfRange},
           Case{"::ffff:10.0.0.0/129", E::kLengthOutOfRange},
           Case{std::string("1.2.3.4\0evil", 12), E::kBadAddress},  // a NUL would cut inet_pton
           Case{std::string("1.2.3.4/2\0", 10), E::kBadLength},
           Case{std::string(46, '1'), E::kBadAddress},  // longer than any address text
       }) {
    EXPECT_EQ(parse(c.text), c.why) << c.text;
  }
}

TEST(IpText, FormatsBothFamilies) {
  IpText t;
  ASSERT_EQ(parse_ip_text("198.51.100.7", t), E::kNone);
  EXPECT_EQ(format_ip(t.addr, t.v4), "198.51.100.7");
  ASSERT_EQ(parse_ip_text("2001:0db8:0000:0000:0000:0000:0000:0001", t), E::kNone);
  EXPECT_EQ(format_ip(t.addr, t.v4), "2001:db8::1");  // RFC 5952
}

TEST(IpPrefix, ParseClearsHostBitsAndKeepsTheFamilyAsWritten) {
  auto p = IpPrefix::parse("198.51.100.77/22");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->str(), "198.51.100.0/22");  // 100 = 0b01100100
  EXPECT_EQ(p->mapped_len_bits(), 118u);
  EXPECT_EQ(IpPrefix::parse("198.51.100.77")->truncated(22), *p);
  auto v6 = IpPrefix::parse("2001:db8:1:2::5/47");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->str(), "2001:db8::/47");  // 1 = 0b1 drops at /47
  EXPECT_FALSE(v6->v4);
  EXPECT_FALSE(IpPrefix::parse("198.51.100.0/33"));
  EXPECT_FALSE(IpPrefix::parse("10.0.0.0/0024"));
}

}  // namespace
}  // namespace spand::net
