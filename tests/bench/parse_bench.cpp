// Benchmark (not a test): nanoseconds per parse_frame call on typical frames, each kind measured
// separately and as a mix; each row is the best of 7 runs (the machine is shared). Prints the
// machine (nproc, CPU model, load average) and the date with the numbers.
// Usage: parse_bench [iterations per kind, default 20000000]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/parse.hpp"
#include "machine.hpp"
#include "packet_builder.hpp"

namespace {

struct Frame {
  const char* name;
  spand::LinkType link;
  std::vector<uint8_t> bytes;  // as captured
  uint32_t wire_len;
};

Frame make(const char* name, const spand::test::TcpSeg& s, const spand::test::FrameOpts& f,
           uint32_t snaplen) {
  return {name, f.link, spand::test::build_frame(s, f, snaplen), spand::test::wire_len_of(s, f)};
}

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Result {
  double wall_ns;  // per call, wall clock
  double cpu_ns;   // per call, this thread's CPU time (robust when other work shares the cores)
};

// Parses `frames` round-robin `iterations` times.
Result measure_once(const std::vector<const Frame*>& frames, uint64_t iterations, uint64_t& sink) {
  spand::ParsedPacket p;
  const double cpu_start = thread_cpu_ns();
  const auto start = std::chrono::steady_clock::now();
  size_t k = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    const Frame& f = *frames[k];
    if (++k == frames.size()) k = 0;
    const spand::Drop d = spand::parse_frame(
        f.link, f.bytes.data(), static_cast<uint32_t>(f.bytes.size()), f.wire_len, i, p);
    sink += static_cast<uint64_t>(d) + p.payload_len + p.seq;
  }
  const auto stop = std::chrono::steady_clock::now();
  const double n = static_cast<double>(iterations);
  return {std::chrono::duration<double, std::nano>(stop - start).count() / n,
          (thread_cpu_ns() - cpu_start) / n};
}

// The machine is shared: the best of several short runs is the one least disturbed by others.
constexpr int kRepeats = 7;
Result measure(const std::vector<const Frame*>& frames, uint64_t iterations, uint64_t& sink) {
  Result best = measure_once(frames, iterations / kRepeats, sink);
  for (int i = 1; i < kRepeats; ++i) {
    const Result r = measure_once(frames, iterations / kRepeats, sink);
    best.wall_ns = std::min(best.wall_ns, r.wall_ns);
    best.cpu_ns = std::min(best.cpu_ns, r.cpu_ns);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  using spand::test::FrameOpts;
  using spand::test::TcpSeg;

  TcpSeg ack;  // bare ACK with timestamps, the most common frame on a busy link
  ack.ts = true;
  ack.tsval = 1000;
  ack.tsecr = 2000;
  TcpSeg data = ack;  // full-size data segment, captured with a 96-byte snap length
  data.payload_len = 1448;
  data.flags = spand::kAck | spand::kPsh;
  TcpSeg syn;  // SYN with the Linux option set
  syn.flags = spand::kSyn;
  syn.mss = 1460;
  syn.sack_permitted = true;
  syn.ts = true;
  syn.wscale = 7;
  TcpSeg sack_ack = ack;  // ACK with 3 SACK blocks
  sack_ack.sack = {{1, 2}, {3, 4}, {5, 6}};
  TcpSeg v6 = data;
  v6.src = "2001:db8::1";
  v6.dst = "2001:db8::2";
  TcpSeg qinq = data;
  qinq.vlans = {100, 200};

  FrameOpts eth;
  FrameOpts sll2;
  sll2.link = spand::LinkType::kLinuxSll2;
  const std::vector<Frame> frames = {
      make("eth_v4_ack_ts", ack, eth, UINT32_MAX),
      make("eth_v4_data_snap96", data, eth, 96),
      make("eth_v4_syn_options", syn, eth, UINT32_MAX),
      make("eth_v4_ack_sack3", sack_ack, eth, UINT32_MAX),
      make("eth_v6_data_snap96", v6, eth, 96),
      make("eth_qinq_v4_data_snap96", qinq, eth, 96),
      make("sll2_v4_data_snap96", data, sll2, 96),
  };

  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::gmtime(&now));
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf(
      "parse_bench: %s; nproc %u; CPU %s; load average %.2f; %llu iterations per row "
      "(best of %d runs)\n",
      date, std::thread::hardware_concurrency(), spand::bench::cpu_model().c_str(), load[0],
      static_cast<unsigned long long>(iterations), kRepeats);
  std::printf("  %-26s %14s %14s %16s\n", "frame", "wall ns/frame", "cpu ns/frame",
              "Mframes/s (cpu)");
  uint64_t sink = 0;
  std::vector<const Frame*> all;
  for (const Frame& f : frames) {
    all.push_back(&f);
    const Result r = measure({&f}, iterations, sink);
    std::printf("  %-26s %14.2f %14.2f %16.1f\n", f.name, r.wall_ns, r.cpu_ns, 1e3 / r.cpu_ns);
  }
  const Result r = measure(all, iterations, sink);
  std::printf("  %-26s %14.2f %14.2f %16.1f\n", "mix_of_all", r.wall_ns, r.cpu_ns, 1e3 / r.cpu_ns);
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(sink));
  return 0;
}
