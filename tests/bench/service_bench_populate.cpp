// Fills Redis with N prefixes (10.x.y.0/24 ...) of window sums for the estimate-service
// benchmark, through RedisStore::write (the real schema). Each prefix gets 6 W_c and 6 RTT
// samples in the bucket holding `now` (wall clock), so a replica with --clock wall answers
// USE_ESTIMATE. Writes the addresses as a ghz data file (JSON array of GetRequest).
// usage: service_bench_populate REDIS_URL N GHZ_DATA_OUT
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "control/control_plane.hpp"
#include "estimates/redis_store.hpp"

int main(int argc, char** argv) {
  using namespace spand;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s REDIS_URL N GHZ_DATA_OUT\n", argv[0]);
    return 2;
  }
  ControlOptions co;
  co.redis_url = argv[1];
  const uint32_t n = uint32_t(std::strtoul(argv[2], nullptr, 10));
  RedisStoreOptions so;
  std::string error;
  if (!redis_store_options_from(co, so, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  RedisStore store(so);
  const uint64_t now_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
  const uint64_t bucket_s = now_ns / 1'000'000'000 / so.window.bucket_s * so.window.bucket_s;
  FILE* data = std::fopen(argv[3], "w");
  if (!data) return 2;
  std::fprintf(data, "[");
  std::vector<BucketUpdate> batch;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t a[4] = {uint8_t(10 + (i >> 16)), uint8_t(i >> 8), uint8_t(i), 7};
    BucketUpdate u;
    u.prefix = prefix_of(IpAddr::from_v4(a), PrefixConfig{});
    u.bucket_start_s = bucket_s;
    for (uint32_t k = 0; k < 6; ++k) {
      Sample s;
      s.ts_ns = now_ns;
      s.kind = SampleKind::kWc;
      s.value = 8 + (i + k) % 24;
      u.acc.add(s);
      s.kind = SampleKind::kRtt;
      s.value = 5'000 + 1'000 * ((i + k) % 50);
      u.acc.add(s);
    }
    batch.push_back(u);
    std::fprintf(data, "%s{\"address\":\"%u.%u.%u.%u\",\"transfer_bytes\":65536}", i ? "," : "",
                 a[0], a[1], a[2], a[3]);
    if (batch.size() == 5000 || i + 1 == n) {
      if (!store.write(batch, error)) {
        std::fprintf(stderr, "write: %s\n", error.c_str());
        return 1;
      }
      batch.clear();
    }
  }
  std::fprintf(data, "]\n");
  std::fclose(data);
  std::printf("populated %u prefixes in bucket %llu\n", n, (unsigned long long)bucket_s);
  return 0;
}
