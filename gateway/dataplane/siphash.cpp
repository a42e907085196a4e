#include "dataplane/siphash.hpp"

namespace spand {
namespace {

inline uint64_t rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct State {
  uint64_t v0, v1, v2, v3;
  void round() {  // SipRound (paper, section 2)
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void compress(uint64_t m) {  // c = 2 rounds per message word
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t siphash24(const SipKey& key, const uint8_t* data, size_t len) {
  // The initialisation constants spell "somepseudorandomlygeneratedbytes".
  State s{key.k0 ^ 0x736f6d6570736575ull, key.k1 ^ 0x646f72616e646f6dull,
          key.k0 ^ 0x6c7967656e657261ull, key.k1 ^ 0x7465646279746573ull};
  const size_t whole = len & ~size_t(7);
  for (size_t i = 0; i < whole; i += 8) s.compress(load_le64(data + i));
  // The last word: the remaining bytes, little-endian, and the length's low byte on top.
  uint64_t last = uint64_t(len & 0xff) << 56;
  for (size_t i = whole; i < len; ++i) last |= uint64_t(data[i]) << (8 * (i - whole));
  s.compress(last);
  s.v2 ^= 0xff;  // finalization: d = 4 rounds
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace spand
