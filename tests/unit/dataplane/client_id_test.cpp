// Client ids are keyed (gateway/dataplane/prefix.hpp, client_id; siphash.hpp): SipHash-2-4
// against the reference vectors, and what the key buys: addresses a forger chose because their
// ids are small under a key it knows take the W_c client table's places under that key, and only
// their random share under another.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "dataplane/prefix.hpp"
#include "dataplane/siphash.hpp"

namespace spand {
namespace {

// Key 00 01 .. 0f, messages 00 01 .. (n-1): the reference implementation's vectors.h (and the
// paper's appendix A for n = 15), as little-endian 64-bit values.
TEST(SipHash, ReferenceVectors) {
  const SipKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint8_t msg[64];
  for (int i = 0; i < 64; ++i) msg[i] = uint8_t(i);
  EXPECT_EQ(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(key, msg, 1), 0x74f839c593dc67fdull);
  EXPECT_EQ(siphash24(key, msg, 7), 0xab0200f58b01d137ull);
  EXPECT_EQ(siphash24(key, msg, 8), 0x93f5f5799a932462ull);
  EXPECT_EQ(siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
  EXPECT_EQ(siphash24(key, msg, 16), 0x3f2acc7f57c29bdbull);
  EXPECT_EQ(siphash24(key, msg, 63), 0x958a324ceb064572ull);
}

// The key's fingerprint (what writers compare in Redis): SipHash-2-4 of the 34-byte label
// "spand client id key fingerprint v1" under the key. Expected values from an independent
// implementation: a 30-line Python SipHash-2-4 written from the paper, which passes the vectors
// above for n = 0, 15 and 63 (the same program is in tests/integration/gateway_redis/
// test_client_key.py, which checks what the gateway stores).
TEST(ClientKeyFingerprint, KnownValues) {
  EXPECT_EQ(client_key_fingerprint(SipKey{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}),
            0xaaf9052f3e9bfe3cull);
  EXPECT_EQ(client_key_fingerprint(kPublicClientIdKey), 0x7d5caccc6739f3aeull);
}

// Any change of the key changes the fingerprint: each of the 128 one-bit changes of a key gives a
// fingerprint of its own (129 distinct values; a collision among them has probability about
// 129^2 / 2^65, so a repeat means the key is not fully mixed in).
TEST(ClientKeyFingerprint, EveryKeyBitCounts) {
  const SipKey base{0x0123456789abcdefull, 0xfedcba9876543210ull};
  std::vector<uint64_t> fps = {client_key_fingerprint(base)};
  for (int bit = 0; bit < 128; ++bit) {
    SipKey k = base;
    (bit < 64 ? k.k0 : k.k1) ^= 1ull << (bit % 64);
    fps.push_back(client_key_fingerprint(k));
  }
  std::sort(fps.begin(), fps.end());
  EXPECT_EQ(std::unique(fps.begin(), fps.end()), fps.end());
}

IpAddr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  const uint8_t raw[4] = {a, b, c, d};
  return IpAddr::from_v4(raw);
}

Sample wc(const IpAddr& client, uint32_t value) {
  Sample s;
  s.kind = SampleKind::kWc;
  s.client = client;
  s.value = value;
  s.ts_ns = 1;
  return s;
}

SipKey key_from(uint64_t seed) {
  std::mt19937_64 r(seed);
  return SipKey{r(), r()};
}

TEST(ClientId, DependsOnTheKey) {
  const IpAddr a = v4(198, 51, 100, 7);
  EXPECT_EQ(client_id(a, key_from(1)), client_id(a, key_from(1)));
  EXPECT_NE(client_id(a, key_from(1)), client_id(a, key_from(2)));
  EXPECT_EQ(client_bit(a, key_from(1)), client_id(a, key_from(1)) >> 27);
  EXPECT_EQ(client_id(a), client_id(a, kPublicClientIdKey));
}

// A victim /24 with 20 honest clients (.1-.20, per-client W_c 10..29) and a forger who can send
// from 8 other addresses of it (spoofed segments, or Report items) with W_c 1. The table keeps
// the 16 smallest ids of the 28 clients; the lower median of its means is the estimate. Against
// a key it knows, the forger picks the 8 addresses of .21-.254 with the smallest ids: they take
// 8 of the 16 places, f >= h in the table, and the estimate falls to 1. Under a key it does not
// know the same 8 addresses are 8 of 28 clients drawn at random: they take 16 * 8 / 28 = 4.6
// places on average (hypergeometric), and f >= 8 has probability C(20,8) / C(28,16) = 0.0041.
struct Outcome {
  uint32_t forged_places;
  double median;
};

Outcome run(const SipKey& key, const std::vector<IpAddr>& forged) {
  Accumulator acc;
  for (uint8_t h = 1; h <= 20; ++h) {
    acc.add(wc(v4(198, 51, 100, h), 9 + h), key);
    acc.add(wc(v4(198, 51, 100, h), 9 + h), key);
  }
  for (const IpAddr& f : forged)
    for (int i = 0; i < 5; ++i) acc.add(wc(f, 1), key);
  uint32_t places = 0;
  for (uint32_t i = 0; i < acc.wc_client_n; ++i)
    for (const IpAddr& f : forged) places += acc.wc_client[i].id == client_id(f, key);
  EXPECT_TRUE(acc.has_wc_client_median());
  EXPECT_EQ(acc.wc_client_n, kWcClientSlots);
  return Outcome{places, acc.wc_client_median()};
}

std::vector<IpAddr> chosen_against(const SipKey& known, size_t n) {
  std::vector<IpAddr> cand;
  for (int d = 21; d <= 254; ++d) cand.push_back(v4(198, 51, 100, uint8_t(d)));
  std::sort(cand.begin(), cand.end(), [&](const IpAddr& a, const IpAddr& b) {
    return client_id(a, known) < client_id(b, known);
  });
  cand.resize(n);
  return cand;
}

TEST(ClientId, AddressesChosenAgainstAKnownKeyLoseTheirAdvantageUnderAnother) {
  const SipKey known = kPublicClientIdKey;  // what an unkeyed (or published) mix amounts to
  const std::vector<IpAddr> forged = chosen_against(known, 8);
  const Outcome with_known = run(known, forged);
  EXPECT_EQ(with_known.forged_places, 8u);
  EXPECT_EQ(with_known.median, 1.0);  // the forger sets the estimate

  const int keys = 400;
  uint32_t places = 0;
  int honest = 0;
  for (int k = 0; k < keys; ++k) {
    const Outcome o = run(key_from(1000 + k), forged);
    places += o.forged_places;
    honest += o.median >= 10.0 && o.median <= 29.0;
  }
  std::printf("known key: %u places, median %.1f; %d keys: mean places %.3f, honest median in %d\n",
              with_known.forged_places, with_known.median, keys, double(places) / keys, honest);
  // Mean places 4.57 (sd over 400 keys about 0.07): the chosen addresses do no better than any 8.
  const double mean_places = double(places) / keys;
  EXPECT_GT(mean_places, 4.0);
  EXPECT_LT(mean_places, 5.2);
  // f >= h in about 0.4 % of keys: at most a few of 400 let the forger set the estimate.
  EXPECT_GE(honest, keys - 6);
}

}  // namespace
}  // namespace spand
