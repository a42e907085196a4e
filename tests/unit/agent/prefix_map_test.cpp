// The agent's network-aware clustering (prefix_map.hpp, AgentCore::set_prefix_map): the map's
// longest prefix holding a client keys its estimate and its kernel policy (one policy for a
// /16: the BPF policy map is an LPM trie, so it covers every address under it), the fixed /24
// for clients no prefix covers, static prefixes re-keyed, and a reloaded map moving clients.
#include "prefix_map.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "fakes.hpp"

namespace spand::agent::test {
namespace {

std::shared_ptr<const PrefixMap> map_of(const char* text) {
  auto m = std::make_shared<PrefixMap>();
  std::string error;
  EXPECT_TRUE(PrefixMap::parse(text, *m, error)) << error;
  return m;
}

AgentConfig config() {
  AgentConfig c;
  c.estimates_file = "x";
  PortConfig web;
  web.port = 80;
  web.response_bytes = 1448 * 11;
  c.ports.push_back(web);
  c.policy.window_rule = WindowRule::kPaper;
  return c;
}

TEST(AgentPrefixMap, LongestPrefixHoldingTheAddressOrTheCidr) {
  auto m = map_of("10.170.0.0/16\n10.170.2.0/23 # two /24s\n10.170.0.0/24\n2001:db8::/32\n");
  EXPECT_EQ(m->size(), 4u);
  ASSERT_TRUE(m->longest_holding(P("10.170.1.99")));
  EXPECT_EQ(m->longest_holding(P("10.170.1.99"))->str(), "10.170.0.0/16");
  ASSERT_TRUE(m->longest_holding(P("10.170.3.200")));
  EXPECT_EQ(m->longest_holding(P("10.170.3.200"))->str(), "10.170.2.0/23");
  ASSERT_TRUE(m->longest_holding(P("10.170.0.9")));
  EXPECT_EQ(m->longest_holding(P("10.170.0.9"))->str(), "10.170.0.0/24");
  // A CIDR: the longest prefix holding all of it, as the service answers it.
  ASSERT_TRUE(m->longest_holding(P("10.170.0.0/16")));
  EXPECT_EQ(m->longest_holding(P("10.170.0.0/16"))->str(), "10.170.0.0/16");
  ASSERT_TRUE(m->longest_holding(P("10.170.2.0/24")));
  EXPECT_EQ(m->longest_holding(P("10.170.2.0/24"))->str(), "10.170.2.0/23");
  EXPECT_FALSE(m->longest_holding(P("10.0.0.0/8")));
  EXPECT_FALSE(m->longest_holding(P("192.0.2.1")));
  ASSERT_TRUE(m->longest_holding(P("2001:db8:5::1")));
  EXPECT_EQ(m->longest_holding(P("2001:db8:5::1"))->str(), "2001:db8::/32");
  // IPv4-mapped, written as IPv6: IPv4 (sock_diag gives it as IPv4 already).
  ASSERT_TRUE(m->longest_holding(P("::ffff:10.170.1.1")));
  EXPECT_EQ(m->longest_holding(P("::ffff:10.170.1.1"))->str(), "10.170.0.0/16");
}

TEST(AgentPrefixMap, BadFileNamesItsLine) {
  PrefixMap m;
  std::string error;
  EXPECT_FALSE(PrefixMap::parse("10.170.0.0/16\n\n10.170.2.1/23\n", m, error));
  EXPECT_NE(error.find("line 3"), std::string::npos) << error;
  EXPECT_NE(error.find("host bits"), std::string::npos) << error;
  EXPECT_FALSE(PrefixMap::parse("10.170.0.0/16\nnot-a-prefix\n", m, error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
}

TEST(AgentPrefixMap, ClientsAreKeyedAskedAndInstalledUnderTheMapsPrefix) {
  AgentConfig cfg = config();
  cfg.static_prefixes.push_back(P("10.170.2.0/24"));  // inside the map's /23
  FakeClock clock;
  FakeSource source;
  FakeApplier kernel;
  source.estimates[P("10.170.0.0/16")] = E("10.170.0.0/16", 10);
  source.estimates[P("10.170.2.0/23")] = E("10.170.2.0/23", 10);
  source.estimates[P("192.0.2.0/24")] = E("192.0.2.0/24", 10);
  AgentCore core(cfg, source, kernel, clock);
  core.set_prefix_map(map_of("10.170.0.0/16\n10.170.2.0/23\n"));
  // A push for the static prefix's key before the map (a file source pushes all it has): the
  // entry left behind is not applied on its way out.
  source.pushes.push_back(E("10.170.2.0/24", 10));
  core.observe(P("10.170.1.99"));
  core.observe(P("10.170.7.1"));  // the same /16: one entry, one policy
  core.observe(P("192.0.2.77"));  // no prefix covers it: its /24
  core.tick();
  std::vector<Prefix> want = {P("10.170.0.0/16"), P("10.170.2.0/23"), P("192.0.2.0/24")};
  EXPECT_EQ(core.wanted(), want);
  EXPECT_EQ(source.watched, want);
  ASSERT_EQ(kernel.kernel.size(), 3u);
  for (const Prefix& p : want) EXPECT_EQ(kernel.kernel.count(PolicyKey{80, p}), 1u) << p.str();
  EXPECT_EQ(kernel.upserts, 3);
  EXPECT_EQ(kernel.removes, 0);

  // A reloaded map with a /24 inside the /16: the /16's clients seen again move to it, the /16
  // goes (policy removed), the static /24 stays under the /23.
  source.estimates[P("10.170.1.0/24")] = E("10.170.1.0/24", 12);
  core.set_prefix_map(map_of("10.170.0.0/16\n10.170.2.0/23\n10.170.1.0/24\n"));
  clock.t += 1;
  core.observe(P("10.170.1.99"));
  core.observe(P("192.0.2.77"));
  core.tick();
  want = {P("10.170.1.0/24"), P("10.170.2.0/23"), P("192.0.2.0/24")};
  EXPECT_EQ(core.wanted(), want);
  EXPECT_EQ(kernel.kernel.count(PolicyKey{80, P("10.170.0.0/16")}), 0u);
  EXPECT_EQ(kernel.kernel.count(PolicyKey{80, P("10.170.1.0/24")}), 1u);
  EXPECT_EQ(kernel.kernel.size(), 3u);
}

TEST(AgentPrefixMap, LookupsOfAddressesNoPrefixCoversAreCounted) {
  // spand_agent_prefix_map_uncovered_total (docs/metrics.md), as the gateway's
  // spand_prefix_map_uncovered_total: each lookup of a client address (a connection seen at a
  // refresh, a path reading) that no prefix of the map covers, keyed by the fixed /24 or /48.
  AgentConfig cfg = config();
  cfg.static_prefixes.push_back(P("198.51.100.0/24"));  // configured, no client: not counted
  FakeClock clock;
  FakeSource source;
  FakeApplier kernel;
  AgentCore core(cfg, source, kernel, clock);
  core.observe(P("192.0.2.77"));  // no map: nothing to cover it
  EXPECT_EQ(core.counters().prefix_map_uncovered_total, 0u);

  core.set_prefix_map(map_of("10.170.0.0/16\n2001:db8::/32\n"));
  EXPECT_EQ(core.counters().prefix_map_uncovered_total, 0u);  // the static prefix re-keyed
  core.observe(P("10.170.1.99"));                             // covered
  core.observe(P("::ffff:10.170.2.1"));                       // covered (IPv4-mapped)
  core.observe(P("2001:db8:5::1"));                           // covered
  EXPECT_EQ(core.counters().prefix_map_uncovered_total, 0u);
  core.observe(P("192.0.2.77"));
  core.observe(P("192.0.2.77"));  // each lookup, as the gateway's
  core.observe(P("2001:db9::1"));
  EXPECT_EQ(core.counters().prefix_map_uncovered_total, 3u);
  // A path reading's key (path_readings.cpp) is a lookup too.
  EXPECT_EQ(core.key_prefix(P("203.0.113.9")).str(), "203.0.113.0/24");
  EXPECT_EQ(core.counters().prefix_map_uncovered_total, 4u);
  core.tick();
  std::vector<Prefix> want = {P("10.170.0.0/16"), P("192.0.2.0/24"), P("198.51.100.0/24"),
                              P("2001:db8::/32"), P("2001:db9::/48")};
  EXPECT_EQ(core.wanted(), want);
}

TEST(AgentPrefixMap, FileIsReadAgainWhenItChangesAndKeptWhenBroken) {
  char path[] = "/tmp/spand-agent-map-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto write = [&](const char* text) {
    const std::string tmp = std::string(path) + ".new";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path), 0);  // a new inode, as an editor or rsync does
  };
  write("10.170.0.0/16\n");
  PrefixMapFile f(path);
  std::string error;
  ASSERT_TRUE(f.load(error)) << error;
  EXPECT_EQ(f.map()->size(), 1u);
  EXPECT_FALSE(f.reload_if_changed(error));  // unchanged
  write("10.170.0.0/16\n10.170.2.0/23\n");
  EXPECT_TRUE(f.reload_if_changed(error)) << error;
  EXPECT_EQ(f.map()->size(), 2u);
  write("10.170.0.0/16\nbroken\n");
  error.clear();
  EXPECT_FALSE(f.reload_if_changed(error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_EQ(f.map()->size(), 2u);  // the previous map stays
  error.clear();
  EXPECT_FALSE(f.reload_if_changed(error));  // said once per change
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(f.reloads(), 1u);
  std::remove(path);
}

}  // namespace
}  // namespace spand::agent::test
