// Redis Cluster key slot: CRC16 (XMODEM) of the key, or of its hash tag, modulo 16384, as the
// Redis Cluster specification defines it ("Keys distribution model").
#pragma once

#include <cstdint>
#include <string_view>

namespace spand {

inline constexpr uint16_t kClusterSlots = 16384;

// CRC16-CCITT/XMODEM: polynomial 0x1021, initial value 0, no reflection, no final xor.
uint16_t crc16_xmodem(std::string_view data);

// The part of the key that is hashed: the text between the first '{' and the first '}' after
// it, if that text is non-empty; otherwise the whole key.
std::string_view hash_tag(std::string_view key);

uint16_t key_slot(std::string_view key);

}  // namespace spand
