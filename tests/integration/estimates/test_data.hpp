// Deterministic samples for the Redis tests, and the window sums computed from the raw samples
// (not from Accumulator), to compare with what Redis returns.
#pragma once

#include <arpa/inet.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/prefix.hpp"
#include "dataplane/sample.hpp"

namespace spand::test {

constexpr uint64_t kSec = 1'000'000'000ULL;

inline IpAddr v4(uint32_t host_order) {
  uint8_t raw[4] = {uint8_t(host_order >> 24), uint8_t(host_order >> 16), uint8_t(host_order >> 8),
                    uint8_t(host_order)};
  return IpAddr::from_v4(raw);
}

// 10.a.b.c: the /24 of client index i is 10.(i/256).(i%256).0/24.
inline IpAddr client_of(uint32_t prefix_index, uint32_t host) {
  return v4((10u << 24) | ((prefix_index & 0xffff) << 8) | (host & 0xff));
}

inline Prefix prefix24(uint32_t prefix_index) {
  return prefix_with_len(client_of(prefix_index, 0), 24);
}

struct Lcg {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(s >> 33);
  }
};

inline Sample make_sample(SampleKind kind, IpAddr client, uint32_t value, uint64_t ts_ns,
                          SampleOrigin origin = SampleOrigin::kGateway) {
  Sample s;
  s.kind = kind;
  s.client = client;
  s.value = value;
  s.ts_ns = ts_ns;
  s.origin = origin;
  return s;
}

struct Expected {
  uint64_t wc_n = 0;
  double wc_sum = 0, wc_sumsq = 0;
  uint64_t rtt_n = 0;
  double rtt_sum = 0;
  uint32_t rtt_min = UINT32_MAX;
  uint64_t newest = 0;
};

// Samples of `prefix` with ts in (lo_ns, hi_ns].
inline Expected expected_in(const std::vector<Sample>& all, const Prefix& prefix, uint64_t lo_ns,
                            uint64_t hi_ns) {
  Expected e;
  for (const Sample& s : all) {
    if (!(s.ts_ns > lo_ns && s.ts_ns <= hi_ns)) continue;
    if (!(prefix_with_len(s.client, prefix.len) == prefix)) continue;
    if (s.kind == SampleKind::kWc) {
      ++e.wc_n;
      e.wc_sum += s.value;
      e.wc_sumsq += double(s.value) * double(s.value);
    } else if (s.kind == SampleKind::kRtt) {
      ++e.rtt_n;
      e.rtt_sum += s.value;
      if (s.value < e.rtt_min) e.rtt_min = s.value;
    } else {
      continue;
    }
    if (s.ts_ns > e.newest) e.newest = s.ts_ns;
  }
  return e;
}

}  // namespace spand::test
