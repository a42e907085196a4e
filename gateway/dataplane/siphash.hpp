// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed hash
// whose outputs cannot be predicted, nor inputs chosen to collide or to order, without the
// 128-bit key. Used for client ids (prefix.hpp, client_id), where addresses chosen offline
// against a known mix could win places in the W_c client table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spand {

struct SipKey {
  uint64_t k0 = 0;  // key bytes 0-7, little-endian
  uint64_t k1 = 0;  // key bytes 8-15
};

uint64_t siphash24(const SipKey& key, const uint8_t* data, size_t len);

}  // namespace spand
