// Benchmark (not a test): the data plane's own work per packet, with no receive path. A capture
// is read into memory once; then each pass gives all its frames to a fresh Worker in bursts of 32
// (Worker::handle_burst, what both sources call) and pops the rings on the same thread every 32
// bursts, as the control side would. Prints per pass the ns per packet of this thread's CPU time
// and of wall time, the median and the best, the outputs' counts (which must not change between
// builds), and the machine.
//
// Usage: packet_loop_bench CAPTURE [passes, default 7]
// The worker's table is committed before the clock starts (WorkerConfig::prefault_table, as on a
// live port), so page faults are not counted; the capture's own timestamps drive the clock (as
// --pcap and net_pcap without infinite_rx).
#include <pcap/pcap.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/worker.hpp"
#include "machine.hpp"

namespace {

struct Capture {
  spand::LinkType link = spand::LinkType::kEthernet;
  std::vector<uint8_t> bytes;                 // every frame's captured bytes, back to back
  std::vector<spand::Worker::FrameRef> refs;  // data pointers set once bytes stop growing
  std::vector<size_t> offsets;
};

bool load(const char* path, Capture& cap) {
  char err[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* pc = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, err);
  if (pc == nullptr) {
    std::fprintf(stderr, "packet_loop_bench: %s: %s\n", path, err);
    return false;
  }
  switch (pcap_datalink(pc)) {
    case DLT_EN10MB:
      cap.link = spand::LinkType::kEthernet;
      break;
    case DLT_RAW:
      cap.link = spand::LinkType::kRaw;
      break;
    case DLT_LINUX_SLL:
      cap.link = spand::LinkType::kLinuxSll;
      break;
    default:
      std::fprintf(stderr, "packet_loop_bench: %s: link type %d not handled here\n", path,
                   pcap_datalink(pc));
      pcap_close(pc);
      return false;
  }
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  while (pcap_next_ex(pc, &hdr, &data) == 1) {
    cap.offsets.push_back(cap.bytes.size());
    cap.bytes.insert(cap.bytes.end(), data, data + hdr->caplen);
    cap.refs.push_back({nullptr, hdr->caplen, hdr->len,
                        uint64_t(hdr->ts.tv_sec) * 1'000'000'000ull + uint64_t(hdr->ts.tv_usec)});
  }
  pcap_close(pc);
  for (size_t i = 0; i < cap.refs.size(); ++i) cap.refs[i].data = cap.bytes.data() + cap.offsets[i];
  return !cap.refs.empty();
}

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Pass {
  double cpu_ns = 0;   // per packet
  double wall_ns = 0;  // per packet
  spand::WorkerCounters counters;
};

Pass run_pass(const Capture& cap) {
  spand::WorkerConfig cfg;
  cfg.prefault_table = true;
  spand::Worker w(cfg);
  spand::Sample s;
  spand::FlowRecord r;
  auto drain = [&] {
    while (w.samples().pop(s)) {
    }
    while (w.flows().pop(r)) {
    }
  };
  const uint32_t n = static_cast<uint32_t>(cap.refs.size());
  constexpr uint32_t kBurst = spand::Worker::kBurst;
  const double cpu0 = thread_cpu_ns();
  const auto t0 = std::chrono::steady_clock::now();
  uint32_t bursts = 0;
  for (uint32_t i = 0; i < n; i += kBurst) {
    w.handle_burst(cap.link, cap.refs.data() + i, std::min(kBurst, n - i));
    if (++bursts % 32 == 0) drain();
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = thread_cpu_ns();
  drain();
  Pass p;
  p.cpu_ns = (cpu1 - cpu0) / n;
  p.wall_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
  while (w.finish_some(w.finish_batch())) drain();
  drain();
  p.counters = w.counters();
  return p;
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: packet_loop_bench CAPTURE [passes]\n");
    return 2;
  }
  const int passes = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  Capture cap;
  if (!load(argv[1], cap)) return 2;
  std::printf("machine: %u x %s, load %s (before)\n", std::thread::hardware_concurrency(),
              spand::bench::cpu_model().c_str(), loadavg().c_str());
  std::printf("capture: %s, %zu frames\n", argv[1], cap.refs.size());
  std::vector<double> cpu, wall;
  Pass last;
  for (int i = 0; i < passes; ++i) {
    last = run_pass(cap);
    cpu.push_back(last.cpu_ns);
    wall.push_back(last.wall_ns);
    std::printf("pass %d: %.1f ns per packet (CPU), %.1f ns (wall)\n", i + 1, last.cpu_ns,
                last.wall_ns);
  }
  const spand::WorkerCounters& c = last.counters;
  std::printf("outputs: %" PRIu64 " tracked, %" PRIu64 " flows, %" PRIu64 " W_c, %" PRIu64
              " RTT, %" PRIu64 " decrease samples\n",
              c.tcp_packets, c.flows_closed, c.samples_wc, c.samples_rtt, c.samples_decrease);
  if (c.ring_full_samples + c.ring_full_flows != 0) std::printf("LOST to full rings\n");
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf(
      "median: %.1f ns per packet (CPU), %.1f (wall); best %.1f (CPU); %.2f Mpps per "
      "CPU-second; load %s (after)\n",
      med(cpu), med(wall), *std::min_element(cpu.begin(), cpu.end()), 1e3 / med(cpu),
      loadavg().c_str());
  return 0;
}
