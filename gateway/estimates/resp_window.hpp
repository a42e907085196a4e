// RESP (the Redis protocol) decoding of one reply straight from a receive buffer, for the
// single-node window reader (window_reader.hpp): status, error, integer and bulk replies are
// skipped over, and the bulk strings of an array reply (an HMGET of a window's bucket fields) are
// added into an Accumulator as they are read, without a reply tree. Fuzzed by
// tests/fuzz/fuzz_resp.cpp.
#pragma once

#include <cstddef>
#include <string_view>

#include "dataplane/prefix.hpp"

namespace spand::resp {

// kIncomplete: more bytes are needed (nothing consumed); kBad: not RESP, or not a reply a window
// read can get (an array element that is not a bulk string).
enum class Parse { kDone, kIncomplete, kBad };

// What one reply said.
struct Reply {
  enum class Type { kArray, kError, kStatus, kOther } type = Type::kOther;
  std::string_view text;      // kError / kStatus line (points into the receive buffer)
  bool bad_value = false;     // an array element that is not a packed bucket value
  std::string_view bad_text;  // that element
};

// Parses one reply at [p, end); the bulk strings of an array reply are added into `acc` (reset
// first; nil elements are empty buckets). On kDone, `consumed` is the reply's length in bytes.
Parse parse_reply(const char* p, const char* end, Reply& r, Accumulator& acc, size_t& consumed);

}  // namespace spand::resp
