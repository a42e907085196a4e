#include "prefix.hpp"

#include <gtest/gtest.h>

namespace spand::agent {
namespace {

TEST(Prefix, ParseAndTruncate) {
  auto p = Prefix::parse("198.51.100.77/24");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->str(), "198.51.100.0/24");
  EXPECT_EQ(p->mapped_len_bits(), 120u);
  auto host = Prefix::parse("198.51.100.77");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->len_bits, 32);
  EXPECT_EQ(host->truncated(24), *p);
  auto v6 = Prefix::parse("2001:db8:1:2::5/48");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->str(), "2001:db8:1::/48");
  EXPECT_FALSE(v6->v4);
  EXPECT_EQ(Prefix::parse("10.1.2.3/23")->str(), "10.1.2.0/23");
}

TEST(Prefix, Rejects) {
  EXPECT_FALSE(Prefix::parse("198.51.100.0/33"));
  EXPECT_FALSE(Prefix::parse("2001:db8::/129"));
  EXPECT_FALSE(Prefix::parse("nonsense"));
  EXPECT_FALSE(Prefix::parse("10.0.0.0/"));
  EXPECT_FALSE(Prefix::parse("10.0.0.0/2x"));
}

}  // namespace
}  // namespace spand::agent
