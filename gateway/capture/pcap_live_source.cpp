// A live interface through libpcap: a TPACKET_V3 ring (libpcap's default on Linux when immediate
// mode is off), per-packet kernel timestamps in nanoseconds, kernel drops from pcap_stats(). The
// worker and the Collector run on this thread, as for files; between ring blocks the worker's
// clock is moved to the host's time so that timeouts fire on a quiet link.
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <thread>

#include "capture/collector.hpp"
#include "capture/port_drops.hpp"
#include "capture/source.hpp"
#include "capture/stop_signals.hpp"

namespace spand {

namespace {

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct LiveCtx {
  Worker* worker;
  LinkType link;
};

void on_frame(u_char* user, const pcap_pkthdr* hdr, const u_char* data) {
  auto* c = reinterpret_cast<LiveCtx*>(user);
  // PCAP_TSTAMP_PRECISION_NANO: tv_usec holds nanoseconds.
  const uint64_t ts_ns = uint64_t(hdr->ts.tv_sec) * 1'000'000'000ull + uint64_t(hdr->ts.tv_usec);
  c->worker->stage_frame(c->link, data, hdr->caplen, hdr->len, ts_ns);
}

// Opens and activates the interface; nullptr with `error` set. `fatal` is false when retrying
// may help (the interface is down or not there yet).
pcap_t* open_live(const SourceOptions& opts, LinkType& link, std::string& error, bool& fatal) {
  const LiveOptions& lo = opts.live;
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  fatal = true;
  pcap_t* pc = pcap_create(lo.interface.c_str(), errbuf);
  if (!pc) {
    error = lo.interface + ": " + errbuf;
    return nullptr;
  }
  pcap_set_snaplen(pc, int(lo.snaplen));
  pcap_set_promisc(pc, lo.promisc ? 1 : 0);
  pcap_set_timeout(pc, int(lo.block_timeout_ms));
  pcap_set_buffer_size(pc, int(std::min<uint64_t>(uint64_t(lo.buffer_mb) << 20, 1u << 30)));
  pcap_set_tstamp_precision(pc, PCAP_TSTAMP_PRECISION_NANO);
  if (!lo.tstamp_type.empty()) {
    const int t = pcap_tstamp_type_name_to_val(lo.tstamp_type.c_str());
    if (t < 0 || pcap_set_tstamp_type(pc, t) != 0) {
      error = "--timestamp '" + lo.tstamp_type + "': not offered by " + lo.interface;
      pcap_close(pc);
      return nullptr;
    }
  }
  const int rc = pcap_activate(pc);
  if (rc < 0) {
    error = lo.interface + ": " + pcap_statustostr(rc) +
            (rc == PCAP_ERROR ? std::string(": ") + pcap_geterr(pc) : "");
    fatal = !(rc == PCAP_ERROR_IFACE_NOT_UP || rc == PCAP_ERROR_NO_SUCH_DEVICE);
    pcap_close(pc);
    return nullptr;
  }
  if (rc == PCAP_WARNING_TSTAMP_TYPE_NOTSUP) {
    std::fprintf(stderr, "spand-gateway: %s: timestamp type '%s' not supported, using host time\n",
                 lo.interface.c_str(), lo.tstamp_type.c_str());
  }
  if (pcap_setnonblock(pc, 1, errbuf) != 0) {  // poll() below does the waiting
    error = lo.interface + ": " + errbuf;
    pcap_close(pc);
    return nullptr;
  }
  if (pcap_get_tstamp_precision(pc) != PCAP_TSTAMP_PRECISION_NANO) {
    error = lo.interface + ": no nanosecond timestamps";
    pcap_close(pc);
    return nullptr;
  }
  if (!link_type_from_dlt(pcap_datalink(pc), link)) {
    error = lo.interface + ": unsupported link type " + std::to_string(pcap_datalink(pc)) +
            "; supported: " + kSupportedLinkTypes;
    pcap_close(pc);
    return nullptr;
  }
  if (!set_pcap_filter(pc, opts.filter, error)) {
    pcap_close(pc);
    return nullptr;
  }
  return pc;
}

}  // namespace

SourceStatus run_live_source(const SourceOptions& opts, Collector& out, std::string& error) {
  LinkType link = LinkType::kEthernet;
  bool fatal = true;
  pcap_t* pc = open_live(opts, link, error, fatal);
  if (!pc) return SourceStatus::kBadInput;
  WorkerConfig wc = opts.worker;
  wc.prefault_table = true;  // a live port: no page faults on the packet path later
  Worker worker(wc);
  std::fprintf(stderr,
               "live: %s, libpcap TPACKET_V3 ring %u MiB, snaplen %u, per-packet %s timestamps "
               "(ns)\n",
               opts.live.interface.c_str(), opts.live.buffer_mb, opts.live.snaplen,
               opts.live.tstamp_type.empty() ? "host" : opts.live.tstamp_type.c_str());

  StopSignals stop;

  const auto start = std::chrono::steady_clock::now();
  auto last_stats = start;
  // pcap_stats restarts from 0 on a new handle: the totals of the handles before, per cause.
  uint64_t kernel_before_reopen = 0, ifdrop_before_reopen = 0;
  uint64_t kernel_drops = 0, ifdrops = 0;
  uint64_t last_frames = 0;
  LiveCtx ctx{&worker, link};
  SourceStatus status = SourceStatus::kOk;
  const size_t drop_row = port_drops().add_port(
      opts.live.interface, {CaptureDropCause::kKernel, CaptureDropCause::kInterface});
  auto read_drops = [&] {
    pcap_stat st{};
    if (pc && pcap_stats(pc, &st) == 0) {
      kernel_drops = kernel_before_reopen + st.ps_drop;
      ifdrops = ifdrop_before_reopen + st.ps_ifdrop;
      worker.set_capture_drops(kernel_drops + ifdrops);
      port_drops().set(drop_row, CaptureDropCause::kKernel, kernel_drops);
      port_drops().set(drop_row, CaptureDropCause::kInterface, ifdrops);
    }
  };
  while (!stop.requested()) {
    const auto now = std::chrono::steady_clock::now();
    if (opts.live.duration_s && now - start >= std::chrono::seconds(opts.live.duration_s)) break;
    if (!pc) {  // the interface went away: try again each second, keep the flows
      std::this_thread::sleep_for(std::chrono::seconds(1));
      pc = open_live(opts, link, error, fatal);
      if (pc) {
        std::fprintf(stderr, "live: %s is back\n", opts.live.interface.c_str());
        error.clear();
      } else if (fatal) {
        status = SourceStatus::kRuntimeError;
        break;
      }
      worker.advance_time(realtime_ns());
      out.drain(worker);
      continue;
    }
    pollfd pfd{pcap_get_selectable_fd(pc), POLLIN, 0};
    poll(&pfd, 1, int(opts.live.block_timeout_ms));
    const int n = pcap_dispatch(pc, -1, on_frame, reinterpret_cast<u_char*>(&ctx));
    if (n == PCAP_ERROR) {
      std::fprintf(stderr, "live: %s: %s; keeping %" PRIu64 " connections, reopening\n",
                   opts.live.interface.c_str(), pcap_geterr(pc), worker.counters().active_flows);
      read_drops();
      kernel_before_reopen = kernel_drops;
      ifdrop_before_reopen = ifdrops;
      worker.note_interface_down();
      pcap_close(pc);
      pc = nullptr;
      continue;
    }
    // Between blocks: the host clock moves the worker's (timeouts on a quiet link), and flow and
    // loss memory is committed ahead of the most in use (no page fault in a block).
    worker.advance_time(realtime_ns());
    worker.commit_ahead();
    const uint64_t written = out.flows_written() + out.samples_written();
    out.drain(worker);
    // Whole lines for a reader that follows the outputs while the gateway runs.
    if (out.flows_written() + out.samples_written() != written) out.flush();
    if (now - last_stats >= std::chrono::seconds(1)) {
      const uint64_t dropped_before = worker.counters().capture_drops;
      read_drops();
      const uint64_t dropped = worker.counters().capture_drops;
      if (dropped > dropped_before) {
        std::fprintf(stderr,
                     "live: %s: the kernel dropped %" PRIu64 " frames (%" PRIu64
                     " in all); raise --buffer-mb\n",
                     opts.live.interface.c_str(), dropped - dropped_before, dropped);
      }
      if (opts.progress) {
        const double s = std::chrono::duration<double>(now - last_stats).count();
        const uint64_t frames = worker.counters().frames;
        std::fprintf(stderr,
                     "progress: %" PRIu64 " frames, %.0f pps, %" PRIu64 " active, %" PRIu64
                     " dropped by the kernel\n",
                     frames, (frames - last_frames) / s, worker.counters().active_flows, dropped);
        last_frames = frames;
      }
      last_stats = now;
    }
  }
  read_drops();
  if (pc) pcap_close(pc);
  stop.restore();
  while (worker.finish_some(worker.finish_batch())) out.drain(worker);
  out.drain(worker);
  out.flush();
  out.set_elapsed(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  out.print_summary(stderr, {&worker});
  if (status == SourceStatus::kOk &&
      (worker.counters().capture_drops || worker.counters().capture_interface_down)) {
    status = SourceStatus::kCaptureLoss;
  }
  return status;
}

}  // namespace spand
