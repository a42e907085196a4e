// Network-aware clustering: the prefix map file's syntax, longest-prefix match for IPv4 and IPv6,
// the fallback to the fixed lengths with its counter, and a reload when the file changes.
#include "dataplane/prefix_map.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "capture/prefix_map_file.hpp"
#include "sim.hpp"

namespace spand::test {
namespace {

std::string match(const PrefixMap& m, const std::string& a) {
  Prefix p;
  return m.longest_match(addr(a), p) ? p.to_string() : "none";
}

TEST(PrefixMap, LongestPrefixWinsForBothFamilies) {
  PrefixMap m;
  std::string error;
  ASSERT_TRUE(parse_prefix_map(
      "# a RIB excerpt\n198.51.0.0/16\n198.51.100.0/22  # more specific\n\n 198.51.100.128/25\n"
      "2001:db8::/32\r\n2001:db8:aa00::/40\n192.0.2.7\n",
      m, error))
      << error;
  EXPECT_EQ(m.size(), 6u);
  EXPECT_EQ(match(m, "198.51.7.1"), "198.51.0.0/16");
  EXPECT_EQ(match(m, "198.51.103.255"), "198.51.100.0/22");
  EXPECT_EQ(match(m, "198.51.100.127"), "198.51.100.0/22");
  EXPECT_EQ(match(m, "198.51.100.128"), "198.51.100.128/25");
  EXPECT_EQ(match(m, "192.0.2.7"), "192.0.2.7/32");
  EXPECT_EQ(match(m, "192.0.2.8"), "none");
  EXPECT_EQ(match(m, "203.0.113.1"), "none");
  EXPECT_EQ(match(m, "2001:db8:aaff::1"), "2001:db8:aa00::/40");
  EXPECT_EQ(match(m, "2001:db8:ab00::1"), "2001:db8::/32");
  EXPECT_EQ(match(m, "2001:db9::1"), "none");
  // An IPv4 prefix never covers an IPv6 address of the same bits, nor the reverse.
  EXPECT_EQ(match(m, "::ffff:198.51.7.1"), "198.51.0.0/16");  // IPv4-mapped is IPv4
  EXPECT_EQ(match(m, "c633:0700::1"), "none");
}

TEST(PrefixMap, ACidrQueryGetsTheLongestPrefixHoldingAllOfIt) {
  PrefixMap m;
  std::string error;
  ASSERT_TRUE(
      parse_prefix_map("10.0.0.0/8\n10.1.0.0/16\n10.1.0.0/24\n2001:db8::/32\n"
                       "2001:db8::/48\n",
                       m, error))
      << error;
  Prefix p;
  // 10.1.0.0/16 asked as a CIDR: the /24 covers its network address but not all of it.
  ASSERT_TRUE(m.longest_match(addr("10.1.0.0"), p, 16));
  EXPECT_EQ(p.to_string(), "10.1.0.0/16");
  ASSERT_TRUE(m.longest_match(addr("10.1.0.0"), p, 20));  // a /20 inside the /16 only
  EXPECT_EQ(p.to_string(), "10.1.0.0/16");
  ASSERT_TRUE(m.longest_match(addr("10.1.0.0"), p, 24));
  EXPECT_EQ(p.to_string(), "10.1.0.0/24");
  ASSERT_TRUE(m.longest_match(addr("10.1.0.0"), p, 12));
  EXPECT_EQ(p.to_string(), "10.0.0.0/8");
  EXPECT_FALSE(m.longest_match(addr("10.1.0.0"), p, 7));  // wider than every prefix
  ASSERT_TRUE(m.longest_match(addr("2001:db8::"), p, 40));
  EXPECT_EQ(p.to_string(), "2001:db8::/32");
}

TEST(PrefixMap, BadLinesNameTheirNumber) {
  PrefixMap m;
  std::string error;
  EXPECT_FALSE(parse_prefix_map("10.0.0.0/8\nnot-a-prefix\n", m, error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(parse_prefix_map("10.0.0.0/33\n", m, error));
  EXPECT_NE(error.find("line 1"), std::string::npos) << error;
  EXPECT_FALSE(parse_prefix_map("\n\n10.1.2.3/8\n", m, error));  // host bits set
  EXPECT_NE(error.find("line 3"), std::string::npos) << error;
  EXPECT_NE(error.find("10.0.0.0/8"), std::string::npos) << error;
  EXPECT_FALSE(parse_prefix_map("2001:db8::/129\n", m, error));
  EXPECT_TRUE(parse_prefix_map("# nothing\n\n", m, error));  // an empty map is a map
  EXPECT_EQ(m.size(), 0u);
}

TEST(PrefixMap, PrefixOfFallsBackToFixedLengthsAndCountsIt) {
  PrefixConfig cfg;
  EXPECT_EQ(prefix_of(addr("198.51.100.7"), cfg).to_string(), "198.51.100.0/24");
  cfg.map = std::make_shared<PrefixMapSource>();
  auto m = std::make_shared<PrefixMap>();
  std::string error;
  ASSERT_TRUE(parse_prefix_map("198.51.96.0/20\n2001:db8::/32\n", *m, error));
  cfg.map->current.store(m);
  EXPECT_EQ(prefix_of(addr("198.51.100.7"), cfg).to_string(), "198.51.96.0/20");
  EXPECT_EQ(prefix_of(addr("2001:db8:1:2::3"), cfg).to_string(), "2001:db8::/32");
  EXPECT_EQ(cfg.map->uncovered.load(), 0u);
  EXPECT_EQ(prefix_of(addr("203.0.113.9"), cfg).to_string(), "203.0.113.0/24");
  EXPECT_EQ(prefix_of(addr("2001:db9:1:2::3"), cfg).to_string(), "2001:db9:1::/48");
  EXPECT_EQ(cfg.map->uncovered.load(), 2u);
}

TEST(PrefixMapFile, ReloadsWhenTheFileChangesAndKeepsTheOldMapOnABadOne) {
  char path[] = "/tmp/spand-prefix-map-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto write = [&](const char* text) { std::ofstream(path, std::ios::trunc) << text; };
  write("10.0.0.0/8\n");
  auto source = std::make_shared<PrefixMapSource>();
  std::string error;
  ASSERT_TRUE(load_prefix_map(path, *source, error)) << error;
  PrefixConfig cfg;
  cfg.map = source;
  EXPECT_EQ(prefix_of(addr("10.1.2.3"), cfg).to_string(), "10.0.0.0/8");
  PrefixMapWatcher watcher(path, source);
  EXPECT_FALSE(watcher.check_now());   // unchanged
  write("10.1.0.0/16\n10.0.0.0/8\n");  // a different size: a change whatever the clock
  EXPECT_TRUE(watcher.check_now());
  EXPECT_EQ(prefix_of(addr("10.1.2.3"), cfg).to_string(), "10.1.0.0/16");
  write("10.1.0.0/16\nbad\n");
  EXPECT_FALSE(watcher.check_now());
  EXPECT_EQ(prefix_of(addr("10.1.2.3"), cfg).to_string(), "10.1.0.0/16");  // the old map
  EXPECT_EQ(watcher.reloads(), 1u);
  unlink(path);
  EXPECT_FALSE(load_prefix_map(path, *source, error));
  EXPECT_NE(error.find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace spand::test
