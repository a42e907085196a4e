// Key slots as the Redis Cluster specification defines them ("Keys distribution model",
// "Hash tags"); the integration test also compares with a real server's CLUSTER KEYSLOT.
#include "estimates/key_slot.hpp"

#include <gtest/gtest.h>

#include "estimates/sha1.hpp"

namespace spand {
namespace {

TEST(KeySlot, Crc16CheckValueFromSpec) {
  // The spec's reference implementation: "Output for "123456789" : 31C3".
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(crc16_xmodem(""), 0);
}

TEST(KeySlot, KnownSlotsFromRedisDocs) {
  // CLUSTER KEYSLOT examples in the Redis command reference.
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(key_slot("bar{hash_tag}"), 2515);
  // 0x31C3 = 12739 is below 16384, so the slot is the CRC itself.
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
}

struct TagCase {
  const char* key;
  const char* hashed;
};

TEST(KeySlot, HashTagRulesFromSpec) {
  const TagCase cases[] = {
      {"{user1000}.following", "user1000"},
      {"{user1000}.followers", "user1000"},
      {"foo{}{bar}", "foo{}{bar}"},  // empty first tag: whole key
      {"foo{{bar}}zap", "{bar"},     // from the first '{' to the first '}'
      {"foo{bar}{zap}", "bar"},      // only the first tag counts
      {"foo", "foo"},
      {"foo{bar", "foo{bar"},  // no closing brace: whole key
      {"}foo{bar}", "bar"},
      {"spand:{198.51.100.0/24}:b:100", "198.51.100.0/24"},
  };
  for (const TagCase& c : cases) {
    EXPECT_EQ(hash_tag(c.key), c.hashed) << c.key;
    EXPECT_EQ(key_slot(c.key), crc16_xmodem(c.hashed) % 16384) << c.key;
  }
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
}

TEST(Sha1, FipsVectors) {
  // FIPS 180-2 appendix A examples.
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

}  // namespace
}  // namespace spand
