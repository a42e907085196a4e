// Benchmark (not a test): nanoseconds per spand_cwnd_opt call, on inputs a server would see
// (W_c up to 1000 segments, transfers up to 100 000 segments, random so branches mispredict as
// they would across connections), on 32/64-bit-wide inputs, and on one input repeated.
// Usage: cwnd_bench [calls_per_run]   Prints machine info and the best and median of 7 runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "machine.hpp"
#include "spand.h"

namespace {

struct Input {
  uint32_t wc_segments;
  uint64_t transfer_segments;
  uint32_t b;
};

// Returns ns per call for one pass over `inputs`, `calls` calls in all.
double run_once(const std::vector<Input>& inputs, uint64_t calls, int variant, uint64_t& sink) {
  const auto start = std::chrono::steady_clock::now();
  spand_cwnd_result res;
  for (uint64_t i = 0; i < calls; ++i) {
    const Input& in = inputs[i & (inputs.size() - 1)];
    spand_cwnd_opt(in.wc_segments, in.transfer_segments, in.b, variant, 1, &res);
    sink += res.cwnd_opt;
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() /
         static_cast<double>(calls);
}

void report(const char* name, const std::vector<Input>& inputs, uint64_t calls, int variant) {
  uint64_t sink = 0;
  std::vector<double> ns;
  for (int run = 0; run < 7; ++run) ns.push_back(run_once(inputs, calls, variant, sink));
  std::sort(ns.begin(), ns.end());
  std::printf("%-34s best %6.2f ns/call  median %6.2f ns/call  (%llu calls x 7, sink %llu)\n", name,
              ns.front(), ns[ns.size() / 2], static_cast<unsigned long long>(calls),
              static_cast<unsigned long long>(sink % 1000));
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t calls = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("cwnd_bench  date %s  nproc %u  cpu %s\n", date, std::thread::hardware_concurrency(),
              spand::bench::cpu_model().c_str());

  constexpr size_t kInputs = 1 << 16;  // a power of two: the index is a mask
  std::mt19937_64 rng(42);
  std::vector<Input> typical(kInputs);
  std::vector<Input> wide(kInputs);
  for (size_t i = 0; i < kInputs; ++i) {
    typical[i] = {static_cast<uint32_t>(1 + rng() % 1000), 1 + rng() % 100000,
                  static_cast<uint32_t>(1 + rng() % 2)};
    wide[i] = {static_cast<uint32_t>(1 + rng() % SPAND_WC_MAX_SEGMENTS), rng(),
               static_cast<uint32_t>(1 + rng() % 2)};
  }
  // The paper's worked example over and over: branches perfectly predicted, the floor.
  const std::vector<Input> example(kInputs, Input{10, 11, 1});
  report("worked example repeated, loss-free", example, calls, SPAND_LOSS_FREE);
  report("typical W_c<=1000 F<=1e5, loss-free", typical, calls, SPAND_LOSS_FREE);
  report("typical W_c<=1000 F<=1e5, theorem2", typical, calls, SPAND_THEOREM2);
  report("wide W_c<2^32 F<2^64, loss-free", wide, calls, SPAND_LOSS_FREE);
  return 0;
}
