// Capture files through libpcap (pcap and pcapng), no EAL. The worker runs on this thread and
// the Collector drains it every few hundred packets.
#include <pcap/pcap.h>

#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>

#include "capture/collector.hpp"
#include "capture/source.hpp"
#include "capture/stop_signals.hpp"

namespace spand {

namespace {

constexpr uint32_t kDrainEvery = 256;  // packets between drains; far below the ring capacity

}  // namespace

bool set_pcap_filter(pcap_t* pc, const std::string& filter, std::string& error) {
  if (filter.empty()) return true;
  bpf_program prog;
  if (pcap_compile(pc, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 ||
      pcap_setfilter(pc, &prog) != 0) {
    error = "bad --filter '" + filter + "': " + pcap_geterr(pc);
    return false;
  }
  pcap_freecode(&prog);
  return true;
}

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
  return read_pcap(pc, path, opts, out, error, stderr);
}

SourceStatus read_pcap(pcap_t* pc, const std::string& path, const SourceOptions& opts,
                       Collector& out, std::string& error, FILE* summary) {
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
  if (!set_pcap_filter(pc, opts.filter, error)) {
    pcap_close(pc);
    return SourceStatus::kBadInput;
  }

  Worker worker(opts.worker);
  // SIGINT/SIGTERM during a replay: stop reading, close every open connection (end_of_capture),
  // write the records, print the summary. Records are written whole on this thread, so a signal
  // never cuts a line.
  StopSignals stop;
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  uint64_t n = 0;
  SourceStatus status = SourceStatus::kOk;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  for (;;) {
    if (stop.requested()) {
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
  if (summary) out.print_summary(summary, {&worker});
  pcap_close(pc);
  stop.restore();
  return status;
}

}  // namespace spand
