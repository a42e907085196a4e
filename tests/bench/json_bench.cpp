// JSON Lines writer throughput (issue 16 target: 1 GB/s or more per core): flow records and
// sample records with the magnitudes of a web-like replay (IPv4, 19-digit nanosecond times, byte
// counts of kilobytes to megabytes, a few W_c samples), formatted by the collector's writer and
// written with fwrite to /dev/null through a 1 MiB stdio buffer, as the collector does. One
// thread. Prints MB/s of JSON and records per second, and the machine.
//
// Usage: json_bench [RECORDS]   (default 200000 of each kind)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "capture/collector.hpp"
#include "capture/json_line.hpp"
#include "machine.hpp"

namespace {

using spand::FlowRecord;
using spand::HalfRecord;
using spand::IpAddr;
using spand::JsonLine;
using spand::Sample;

IpAddr v4(std::mt19937_64& rng) {
  const uint8_t b[4] = {10, uint8_t(rng()), uint8_t(rng()), uint8_t(rng())};
  return IpAddr::from_v4(b);
}

HalfRecord half(std::mt19937_64& rng, uint64_t t0, bool sender) {
  HalfRecord h;
  h.packets = 2 + rng() % 60;
  h.data_packets = sender ? 1 + rng() % 50 : 1;
  h.bytes = h.data_packets * (sender ? 1448 : 300);
  h.unique_bytes = h.bytes;
  h.rtt_count = rng() % 20;
  h.rtt_min_us = 90'000 + rng() % 10'000;
  h.rtt_max_us = h.rtt_min_us + rng() % 50'000;
  h.rtt_sum_us = uint64_t(h.rtt_count) * (h.rtt_min_us + 5'000);
  h.mss = 1448;
  h.wscale = 7;
  h.sack_permitted = true;
  h.timestamps = true;
  h.max_flight_segments = uint16_t(1 + rng() % 40);
  h.wc_count = uint8_t(rng() % 3);
  h.wc_kept = h.wc_count;
  for (int i = 0; i < h.wc_kept; ++i) h.wc_segments[i] = uint16_t(2 + rng() % 60);
  h.wc_cwnd_limited_mask = uint8_t(rng() & 3);
  h.md_permille = rng() % 10 == 0 ? uint16_t(500 + rng() % 300) : 0;
  h.first_data_ns = t0 + rng() % 1'000'000'000;
  h.last_data_ns = h.first_data_ns + rng() % 2'000'000'000;
  return h;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200'000;
  std::mt19937_64 rng(16);
  std::vector<FlowRecord> flows(n);
  std::vector<Sample> samples(n);
  const uint64_t t0 = 1'700'000'000'000'000'000ull;
  for (size_t i = 0; i < n; ++i) {
    FlowRecord& f = flows[i];
    f.client = v4(rng);
    f.server = v4(rng);
    f.client_port = uint16_t(1024 + rng() % 60000);
    f.server_port = 443;
    f.handshake_seen = true;
    f.first_ns = t0 + rng() % 100'000'000'000;
    f.last_ns = f.first_ns + rng() % 5'000'000'000;
    f.syn_synack_us = int64_t(90'000 + rng() % 10'000);
    f.synack_ack_us = int64_t(rng() % 1000);
    f.hs_rtt_us = f.syn_synack_us + f.synack_ack_us;
    f.close = spand::CloseReason(rng() % 4);
    f.c2s = half(rng, f.first_ns, false);
    f.s2c = half(rng, f.first_ns, true);
    Sample& s = samples[i];
    s.ts_ns = t0 + rng() % 100'000'000'000;
    s.client = v4(rng);
    s.server = v4(rng);
    s.client_port = uint16_t(1024 + rng() % 60000);
    s.server_port = 443;
    s.kind = rng() % 6 ? spand::SampleKind::kRtt : spand::SampleKind::kWc;
    s.rtt_source = spand::RttSource(1 + rng() % 3);
    s.wc_reason = spand::WcReason(1 + rng() % 3);
    s.value = s.kind == spand::SampleKind::kRtt ? uint32_t(90'000 + rng() % 50'000)
                                                : uint32_t(2 + rng() % 60);
  }
  FILE* out = std::fopen("/dev/null", "w");
  if (!out) return 1;
  std::setvbuf(out, nullptr, _IOFBF, 1 << 20);
  const spand::PrefixConfig cfg;
  JsonLine line;

  std::printf("json_bench: %zu flow records and %zu sample records, one thread\n", n, n);
  std::printf("cpu: %s\n", spand::bench::cpu_model().c_str());
  for (int round = 1; round <= 3; ++round) {
    size_t bytes = 0;
    auto t = std::chrono::steady_clock::now();
    for (const FlowRecord& f : flows) {
      line.clear();
      spand::flow_json(line, f);
      line.lit("\n");
      bytes += fwrite_unlocked(line.view().data(), 1, line.size(), out);
    }
    const double fs = seconds_since(t);
    const size_t fbytes = bytes;
    bytes = 0;
    t = std::chrono::steady_clock::now();
    for (const Sample& s : samples) {
      line.clear();
      spand::sample_json(line, s, cfg);
      line.lit("\n");
      bytes += fwrite_unlocked(line.view().data(), 1, line.size(), out);
    }
    const double ss = seconds_since(t);
    std::printf(
        "round %d: flows %.0f MB/s (%.2f M records/s, %zu B each); samples %.0f MB/s (%.2f M "
        "records/s, %zu B each)\n",
        round, fbytes / fs / 1e6, n / fs / 1e6, fbytes / n, bytes / ss / 1e6, n / ss / 1e6,
        bytes / n);
  }
  std::fclose(out);
  return 0;
}
