// Capture files through libpcap (pcap and pcapng), no EAL. The worker runs on this thread and
// the Collector drains it every few hundred packets.
#include <pcap/pcap.h>

#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>

#include "capture/collector.hpp"
#include "capture/source.hpp"

namespace spand {

namespace {

constexpr uint32_t kDrainEvery = 256;  // packets between drains; far below the ring capacity

// SIGINT/SIGTERM during a replay: stop reading, close every open connection (end_of_capture),
// write the records, print the summary. Records are written whole on this thread, so a signal
// never cuts a line.
volatile sig_atomic_t g_file_stop = 0;
void on_file_stop(int) {
  g_file_stop = 1;
}

}  // namespace

bool link_type_from_dlt(int dlt, LinkType& out) {
  switch (dlt) {
    case DLT_EN10MB:
      out = LinkType::kEthernet;
      return true;
    case DLT_RAW:  // 12 on Linux; LINKTYPE_RAW (101) in files
    case 101:
      out = LinkType::kRaw;
      return true;
    case 113:  // DLT_LINUX_SLL
      out = LinkType::kLinuxSll;
      return true;
    case 228:
      out = LinkType::kIpv4;
      return true;
    case 229:
      out = LinkType::kIpv6;
      return true;
    case 276:  // DLT_LINUX_SLL2
      out = LinkType::kLinuxSll2;
      return true;
    default:
      return false;
  }
}

SourceStatus run_pcap_source(const std::string& path, const SourceOptions& opts, Collector& out,
                             std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* pc =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (!pc) {
    error = path + ": " + errbuf;
    return SourceStatus::kBadInput;
  }
  LinkType link;
  if (!link_type_from_dlt(pcap_datalink(pc), link)) {
    error =
        path + ": unsupported link type " + std::to_string(pcap_datalink(pc)) + " (" +
        (pcap_datalink_val_to_name(pcap_datalink(pc)) ? pcap_datalink_val_to_name(pcap_datalink(pc))
                                                      : "?") +
        "); supported: Ethernet, Linux SLL/SLL2, raw IP";
    pcap_close(pc);
    return SourceStatus::kBadInput;
  }
  if (!opts.filter.empty()) {
    bpf_program prog;
    if (pcap_compile(pc, &prog, opts.filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 ||
        pcap_setfilter(pc, &prog) != 0) {
      error = "bad --filter '" + opts.filter + "': " + pcap_geterr(pc);
      pcap_close(pc);
      return SourceStatus::kBadInput;
    }
    pcap_freecode(&prog);
  }

  Worker worker(opts.worker);
  g_file_stop = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_file_stop;
  sa.sa_flags = SA_RESTART;  // a write blocked on a pipe resumes instead of failing with EINTR
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int = {}, old_term = {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  uint64_t n = 0;
  SourceStatus status = SourceStatus::kOk;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  for (;;) {
    if (g_file_stop) {
      std::fprintf(stderr,
                   "spand-gateway: stopped by a signal after %" PRIu64
                   " packets; open connections are closed as end_of_capture\n",
                   n);
      break;
    }
    const int rc = pcap_next_ex(pc, &hdr, &data);
    if (rc == PCAP_ERROR_BREAK) break;  // end of file
    if (rc != 1) {
      error = path + ": " + pcap_geterr(pc) + " after " + std::to_string(n) +
              " packets; results cover the packets before it";
      status = SourceStatus::kBadInput;
      break;
    }
    const uint64_t ts_ns = uint64_t(hdr->ts.tv_sec) * 1'000'000'000ull + uint64_t(hdr->ts.tv_usec);
    worker.stage_frame(link, data, hdr->caplen, hdr->len, ts_ns);
    if (++n % kDrainEvery == 0) {
      out.drain(worker);
      if (opts.progress && n % (1u << 20) == 0) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_progress >= std::chrono::seconds(1)) {
          last_progress = now;
          const double s = std::chrono::duration<double>(now - start).count();
          std::fprintf(stderr, "progress: %" PRIu64 " packets, %.2f Mpps, %" PRIu64 " active\n", n,
                       n / s / 1e6, worker.counters().active_flows);
        }
      }
    }
  }
  while (worker.finish_some(worker.finish_batch())) out.drain(worker);  // tracks the staged first
  out.drain(worker);
  out.flush();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.set_elapsed(secs);
  out.print_summary(stderr, {&worker});
  pcap_close(pc);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return status;
}

}  // namespace spand
