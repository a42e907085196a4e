// The networks the sock_ops program counts first windows and train rates in
// (program_networks.hpp): with a prefix map a policy whose prefix is not the fixed /24 (/48) is
// marked so that its sockets count under that prefix; the train-rate keys read back as the
// network they name, and land on the map prefix that holds them.
#include "program_networks.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "fakes.hpp"
#include "prefix_map.hpp"

namespace spand::agent::test {
namespace {

spand_policy marked(const ProgramNetworks& n, const char* prefix) {
  spand_policy v{};
  v.flags = SPAND_POLICY_SHARE;
  n.mark(P(prefix), v);
  return v;
}

TEST(ProgramNetworks, WithoutAPrefixMapEveryPolicyCountsInTheFixedNetwork) {
  ProgramNetworks n;  // per_policy off: no --prefix-map
  for (const char* p : {"10.77.0.0/16", "10.77.1.0/24", "10.77.1.64/26", "2001:db8::/32"}) {
    const spand_policy v = marked(n, p);
    EXPECT_EQ(v.flags, SPAND_POLICY_SHARE) << p;
    EXPECT_EQ(v.net_len, 0u) << p;
  }
}

TEST(ProgramNetworks, WithAPrefixMapAPolicyCountsUnderItsOwnPrefix) {
  ProgramNetworks n;
  n.per_policy = true;
  // The length in the IPv4-mapped space, as the LPM key counts it: 96 + the IPv4 length.
  spand_policy v = marked(n, "10.77.0.0/16");
  EXPECT_EQ(v.flags, SPAND_POLICY_SHARE | SPAND_POLICY_OWN_NET);
  EXPECT_EQ(v.net_len, 96u + 16u);
  v = marked(n, "10.77.1.64/26");
  EXPECT_EQ(v.flags, SPAND_POLICY_SHARE | SPAND_POLICY_OWN_NET);
  EXPECT_EQ(v.net_len, 96u + 26u);
  v = marked(n, "2001:db8::/32");
  EXPECT_EQ(v.flags, SPAND_POLICY_SHARE | SPAND_POLICY_OWN_NET);
  EXPECT_EQ(v.net_len, 32u);
  // The fixed network itself (a map prefix that is a /24, or a client no map prefix covers):
  // the program's own key names it already.
  for (const char* p : {"10.77.1.0/24", "2001:db8:1::/48"}) {
    v = marked(n, p);
    EXPECT_EQ(v.flags, SPAND_POLICY_SHARE) << p;
    EXPECT_EQ(v.net_len, 0u) << p;
  }
  // Another fixed length: a /24 is then a policy's own prefix.
  n.v4_len = 20;
  v = marked(n, "10.77.1.0/24");
  EXPECT_EQ(v.flags, SPAND_POLICY_SHARE | SPAND_POLICY_OWN_NET);
  EXPECT_EQ(v.net_len, 120u);
}

spand_active_key key(uint32_t len, std::initializer_list<uint8_t> bytes) {
  spand_active_key k{};
  k.len = len;
  size_t i = 0;
  for (uint8_t b : bytes) k.data[i++] = b;
  return k;
}

TEST(ProgramNetworks, KeysReadBackAsTheNetworksTheyName) {
  // The program's fixed IPv4 key: ::ffff:10.77.1.0 and 96 + 24 bits.
  EXPECT_EQ(
      ProgramNetworks::of_key(key(120, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 1, 0}))
          .str(),
      "10.77.1.0/24");
  // A /16 policy's key.
  EXPECT_EQ(
      ProgramNetworks::of_key(key(112, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 0}))
          .str(),
      "10.77.0.0/16");
  // IPv6 /48: 2001:db8:1::.
  EXPECT_EQ(ProgramNetworks::of_key(key(48, {0x20, 0x01, 0x0d, 0xb8, 0, 1})).str(),
            "2001:db8:1::/48");
  // An IPv6 /48 that happens to be zero (a dual-stack socket's IPv4-mapped client masked to 48
  // bits) is IPv6, not IPv4: its length does not reach into the IPv4 part.
  const Prefix z = ProgramNetworks::of_key(key(48, {}));
  EXPECT_FALSE(z.v4);
  EXPECT_EQ(z.str(), "::/48");
  // Host bits beyond the length are not part of the network.
  EXPECT_EQ(
      ProgramNetworks::of_key(key(112, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 9, 9}))
          .str(),
      "10.77.0.0/16");
}

TEST(ProgramNetworks, TrainReadingsLandOnTheMapPrefixHoldingThem) {
  AgentConfig cfg;
  cfg.estimates_file = "x";
  FakeClock clock;
  FakeSource source;
  FakeApplier kernel;
  AgentCore core(cfg, source, kernel, clock);
  auto m = std::make_shared<PrefixMap>();
  std::string error;
  ASSERT_TRUE(PrefixMap::parse("10.77.0.0/16\n10.77.9.0/26\n", *m, error)) << error;
  core.set_prefix_map(m);
  const std::initializer_list<uint8_t> v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  auto v4key = [&](uint32_t len, uint8_t b2, uint8_t b3) {
    spand_active_key k{};
    k.len = len;
    std::copy(v4.begin(), v4.end(), k.data);
    k.data[12] = 10;
    k.data[13] = 77;
    k.data[14] = b2;
    k.data[15] = b3;
    return k;
  };
  // A /24 reading (a socket without its policy's network in state) and a /16 policy's: both the
  // map's /16.
  EXPECT_EQ(core.key_prefix(ProgramNetworks::of_key(v4key(120, 1, 0))).str(), "10.77.0.0/16");
  EXPECT_EQ(core.key_prefix(ProgramNetworks::of_key(v4key(112, 0, 0))).str(), "10.77.0.0/16");
  // A /26 policy's reading (longer than the fixed /24, so the program keys it by the /26): its
  // own map prefix, which no /24 reading could reach.
  EXPECT_EQ(core.key_prefix(ProgramNetworks::of_key(v4key(122, 9, 0))).str(), "10.77.9.0/26");
  EXPECT_EQ(core.key_prefix(ProgramNetworks::of_key(v4key(120, 9, 0))).str(), "10.77.0.0/16");
}

}  // namespace
}  // namespace spand::agent::test
