#include "estimates/key_slot.hpp"

#include <array>

namespace spand {

namespace {

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t crc = uint16_t(i << 8);
    for (int b = 0; b < 8; ++b)
      crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x1021) : uint16_t(crc << 1);
    t[i] = crc;
  }
  return t;
}

constexpr auto kCrc16Table = make_crc16_table();

}  // namespace

uint16_t crc16_xmodem(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) crc = uint16_t((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

std::string_view hash_tag(std::string_view key) {
  size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  size_t close = key.find('}', open + 1);
  // "{}" (empty tag) or no closing brace: the whole key is hashed.
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

uint16_t key_slot(std::string_view key) {
  return crc16_xmodem(hash_tag(key)) & (kClusterSlots - 1);
}

}  // namespace spand
