// DPDK port source: the worker lcore loop and the main lcore that drains it. EAL convention:
// `spand-gateway [EAL args] -- [gateway options]`. One Worker per worker lcore; worker w polls rx
// queue w of every port, so with the same symmetric RSS key on every multi-queue port both
// directions of a connection meet in one flow table, even when a tap splits the directions over
// two ports. Single-queue ports (net_pcap, net_af_packet without fanout, NICs without RSS) are
// polled by worker 0 alone. The main lcore drains the workers' rings into the Collector, prints
// progress and the `dpdk:` lines at exit. The EAL and the ports are set up in dpdk_port.cpp. See
// README, "spand-gateway on DPDK ports".
#include <pcap/pcap.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "capture/collector.hpp"
#include "capture/dpdk_headers.hpp"
#include "capture/dpdk_port.hpp"
#include "capture/port_drops.hpp"
#include "capture/source.hpp"
#include "capture/stop_signals.hpp"

namespace spand {
namespace {

// A file-backed net_pcap queue never waits for data: an empty poll means end of file (or a
// momentarily empty mempool). This much continuous emptiness, while the worker was not held back
// by full rings, ends the input.
constexpr uint64_t kReplayIdleMs = 50;
// Frames longer than one mbuf (GRO super-segments in captures) are linearized here.
constexpr uint32_t kScratchBytes = 256 * 1024;
constexpr uint64_t kNsPerS = 1'000'000'000;
// The resolution assumed for a clock read once per receive burst: a burst's frames can have
// waited in the ring for up to a block's time (net_af_packet), so RTTs below it are not measured.
constexpr uint32_t kBurstClockResolutionUs = 1000;

struct QueueRef {
  const PortState* port = nullptr;
  uint16_t queue = 0;
  uint64_t last_rx_tsc = 0;
  bool exhausted = false;
  size_t drop_row = PortDrops::kNone;  // queue 0: the port's row of port_drops()
};

struct Clock {
  uint64_t tsc_hz = 1;
  uint64_t tsc0 = 0;
  uint64_t epoch_ns0 = 0;
  int ts_offset = -1;  // mbuf dynfield offset of the rx timestamp, -1 = not registered
  uint64_t ts_flag = 0;

  uint64_t tsc_to_ns(uint64_t tsc) const {
    const uint64_t d = tsc - tsc0;
    return epoch_ns0 + d / tsc_hz * kNsPerS + d % tsc_hz * kNsPerS / tsc_hz;
  }
};

struct WorkerCtx {
  std::unique_ptr<Worker> worker;
  std::vector<QueueRef> queues;
  std::unique_ptr<uint8_t[]> scratch;
  const Clock* clock = nullptr;
  const std::atomic<bool>* stop = nullptr;
  bool host_clock = false;  // a queue's frames are timed by the host clock (not a file's times)
  // Worker 0 reads its ports' drop counters (imissed + rx_nombuf) once a second into its own
  // counters, so /metrics and the summary show capture loss while it happens.
  bool reads_port_stats = false;
  uint64_t next_stats_tsc = 0;
  std::atomic<uint64_t> rx_packets{0};
  std::atomic<uint64_t> filtered{0};
  std::atomic<bool> done{false};
  uint64_t start_tsc = 0;
  uint64_t end_tsc = 0;
  double cpu_s = 0;          // CPU time of the polling thread: the honest rate on a shared machine
  uint64_t page_faults = 0;  // minor faults the polling thread took while polling
  bool all_replay = true;

  bool input_exhausted() const {
    if (!all_replay) return false;
    return std::all_of(queues.begin(), queues.end(), [](const QueueRef& q) { return q.exhausted; });
  }
};

// A replay worker must not outrun the Collector: on a file there is no line rate to keep up
// with, and a lost record would make the DPDK path differ from --pcap. Live ports never wait.
bool rings_need_drain(Worker& w) {
  return w.flows().size() > w.flows().capacity() / 2 ||
         w.samples().size() > w.samples().capacity() / 2;
}

// One pass over the worker's queues; returns the packets received.
uint32_t poll_once(WorkerCtx& c) {
  rte_mbuf* bufs[kRxBurst];
  uint32_t total = 0;
  const uint64_t idle_cycles = c.clock->tsc_hz / 1000 * kReplayIdleMs;
  for (QueueRef& q : c.queues) {
    if (q.exhausted) continue;
    const PortState& p = *q.port;
    if (p.replay && rings_need_drain(*c.worker)) {
      q.last_rx_tsc = rte_rdtsc();
      continue;
    }
    const uint16_t n = rte_eth_rx_burst(p.port_id, q.queue, bufs, kRxBurst);
    const uint64_t now_tsc = rte_rdtsc();
    if (n == 0) {
      if (p.replay && now_tsc - q.last_rx_tsc > idle_cycles) q.exhausted = true;
      continue;
    }
    q.last_rx_tsc = now_tsc;
    // Without a per-packet timestamp all frames of a burst share the time it was received.
    const uint64_t burst_ns = c.clock->tsc_to_ns(now_tsc);
    uint64_t filtered = 0;
    // Frames are staged with the worker (parsed now, their flows prefetched, tracked 32 at a
    // time, in order); a frame spread over several mbufs is first copied into the scratch
    // buffer, which staging does not hold on to.
    for (uint16_t i = 0; i < n; ++i) {
      const rte_mbuf* m = bufs[i];
      const uint32_t wire_len = m->pkt_len;
      const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
      uint32_t caplen = m->data_len;
      if (m->nb_segs > 1) {
        caplen = std::min(wire_len, kScratchBytes);
        data = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, caplen, c.scratch.get()));
        if (data == nullptr) continue;
      }
      if (p.has_filter && bpf_filter(p.filter.bf_insns, data, wire_len, caplen) == 0) {
        ++filtered;
        continue;
      }
      uint64_t ts_ns = burst_ns;
      if (p.pcap_timestamps && (m->ol_flags & c.clock->ts_flag) != 0) {
        ts_ns = *RTE_MBUF_DYNFIELD(m, c.clock->ts_offset, const rte_mbuf_timestamp_t*) * 1000;
      }
      c.worker->stage_frame(p.link, data, caplen, wire_len, ts_ns);
    }
    c.worker->flush_staged();
    rte_pktmbuf_free_bulk(bufs, n);
    total += n;
    if (filtered != 0)
      c.filtered.store(c.filtered.load(std::memory_order_relaxed) + filtered,
                       std::memory_order_relaxed);
  }
  // A live port: the host clock moves the worker's between bursts (timeouts on a quiet link).
  if (c.host_clock) {
    const uint64_t now_tsc = rte_rdtsc();
    c.worker->advance_time(c.clock->tsc_to_ns(now_tsc));
    if (c.reads_port_stats && now_tsc >= c.next_stats_tsc) {
      c.next_stats_tsc = now_tsc + c.clock->tsc_hz;
      uint64_t lost = 0;
      for (const QueueRef& q : c.queues) {
        rte_eth_stats st{};
        if (q.queue == 0 && rte_eth_stats_get(q.port->port_id, &st) == 0) {
          lost += st.imissed + st.rx_nombuf;
          port_drops().set(q.drop_row, CaptureDropCause::kImissed, st.imissed);
          port_drops().set(q.drop_row, CaptureDropCause::kRxNombuf, st.rx_nombuf);
        }
      }
      c.worker->set_capture_drops(lost);
    }
  }
  if (total != 0) {
    c.rx_packets.store(c.rx_packets.load(std::memory_order_relaxed) + total,
                       std::memory_order_relaxed);
  }
  return total;
}

double thread_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

uint64_t thread_page_faults() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<uint64_t>(ru.ru_minflt + ru.ru_majflt);
}

void start_queues(WorkerCtx& c) {
  c.start_tsc = rte_rdtsc();
  for (QueueRef& q : c.queues) q.last_rx_tsc = c.start_tsc;
}

// A replay ends at its last packet, not after the idle wait that detected the end.
uint64_t end_of_input_tsc(const WorkerCtx& c) {
  if (!c.input_exhausted()) return rte_rdtsc();
  uint64_t last = c.start_tsc;
  for (const QueueRef& q : c.queues) last = std::max(last, q.last_rx_tsc);
  return last;
}

int worker_lcore_main(void* arg) {
  WorkerCtx& c = *static_cast<WorkerCtx*>(arg);
  const double cpu0 = thread_cpu_seconds();
  const uint64_t faults0 = thread_page_faults();
  start_queues(c);
  while (!c.stop->load(std::memory_order_relaxed) && !c.input_exhausted()) poll_once(c);
  c.end_tsc = end_of_input_tsc(c);
  c.cpu_s = thread_cpu_seconds() - cpu0;
  c.page_faults = thread_page_faults() - faults0;
  // Close the remaining flows in slices the main lcore can drain: nothing lost to a full ring.
  while (c.worker->finish_some(c.worker->finish_batch())) {
    while (c.worker->flows().size() > 0 || c.worker->samples().size() > 0) rte_pause();
  }
  c.done.store(true, std::memory_order_release);
  return 0;
}

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerS + static_cast<uint64_t>(ts.tv_nsec);
}

// --progress: the packets received so far and the rate since the last line, once a second.
struct Progress {
  bool enabled = false;
  uint64_t hz = 1;
  uint64_t last_packets = 0;
  uint64_t last_tsc = 0;

  void maybe_print(const std::vector<std::unique_ptr<WorkerCtx>>& ctxs) {
    if (!enabled || rte_rdtsc() - last_tsc < hz) return;
    uint64_t packets = 0;
    for (const auto& c : ctxs) packets += c->rx_packets.load(std::memory_order_relaxed);
    const uint64_t now = rte_rdtsc();
    const double secs = static_cast<double>(now - last_tsc) / static_cast<double>(hz);
    std::fprintf(stderr, "dpdk: %llu packets, %.3f Mpps\n",
                 static_cast<unsigned long long>(packets),
                 secs > 0 ? static_cast<double>(packets - last_packets) / secs / 1e6 : 0.0);
    last_packets = packets;
    last_tsc = now;
  }
};

// One worker per worker lcore (one in all when only the main lcore runs), with the queues it
// polls.
std::vector<std::unique_ptr<WorkerCtx>> make_workers(const EalSession& session,
                                                     const SourceOptions& opts, unsigned nb_workers,
                                                     bool burst_clock, const Clock& clock,
                                                     const std::atomic<bool>& stop) {
  std::vector<std::unique_ptr<WorkerCtx>> ctxs;
  for (unsigned w = 0; w < nb_workers; ++w) {
    auto c = std::make_unique<WorkerCtx>();
    WorkerConfig wc = opts.worker;
    wc.prefault_table = true;  // a live port: pay for the table's pages now, not per packet
    if (burst_clock) wc.tracker.rtt_resolution_us = kBurstClockResolutionUs;
    c->worker = std::make_unique<Worker>(wc);
    c->scratch = std::make_unique<uint8_t[]>(kScratchBytes);
    c->clock = &clock;
    c->stop = &stop;
    c->reads_port_stats = w == 0;
    for (const PortState& p : session.ports) {
      // RSS port: worker w owns queue w (the port has no more queues than workers). Other
      // ports: worker 0 owns every queue, since nothing splits their connections by hash,
      // unless the user says their queues hold whole connections (--queues-by-flow): then
      // queue q is worker q mod workers' as well.
      const bool by_flow = p.rss || opts.queues_by_flow;
      for (uint16_t q = 0; q < p.rx_queues; ++q) {
        if (by_flow ? q % nb_workers != w : w != 0) continue;
        // A live port's loss per cause in /metrics (worker 0 reads it, from its queue 0).
        const size_t row = q == 0 && !p.pcap_timestamps
                               ? port_drops().add_port(p.name, {CaptureDropCause::kImissed,
                                                                CaptureDropCause::kRxNombuf})
                               : PortDrops::kNone;
        c->queues.push_back(QueueRef{&p, q, 0, false, row});
        c->all_replay = c->all_replay && p.replay;
        c->host_clock = c->host_clock || !p.pcap_timestamps;
      }
    }
    ctxs.push_back(std::move(c));
  }
  return ctxs;
}

// Only the main lcore: it polls and drains in turn.
void run_on_main_lcore(WorkerCtx& c, Collector& out, const StopSignals& stop_signals,
                       Progress& progress, const std::vector<std::unique_ptr<WorkerCtx>>& ctxs) {
  const double cpu0 = thread_cpu_seconds();
  const uint64_t faults0 = thread_page_faults();
  start_queues(c);
  uint64_t passes = 0;
  while (!stop_signals.requested() && !c.input_exhausted()) {
    poll_once(c);
    if (++passes % 64 == 0 || rings_need_drain(*c.worker)) {
      out.drain(*c.worker);
      c.worker->commit_ahead();  // here between bursts, not at a fault in one
      progress.maybe_print(ctxs);
    }
  }
  c.end_tsc = end_of_input_tsc(c);
  c.cpu_s = thread_cpu_seconds() - cpu0;
  c.page_faults = thread_page_faults() - faults0;
  while (c.worker->finish_some(c.worker->finish_batch())) out.drain(*c.worker);
  out.drain(*c.worker);
}

// Worker lcores poll (worker_lcore_main); the main lcore drains their rings until all are done.
void run_on_worker_lcores(const std::vector<std::unique_ptr<WorkerCtx>>& ctxs, Collector& out,
                          const StopSignals& stop_signals, std::atomic<bool>& stop,
                          Progress& progress) {
  size_t next = 0;
  unsigned lcore = 0;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    rte_eal_remote_launch(worker_lcore_main, ctxs[next++].get(), lcore);
  }
  for (;;) {
    if (stop_signals.requested()) stop.store(true, std::memory_order_relaxed);
    const bool all_done = std::all_of(ctxs.begin(), ctxs.end(), [](const auto& c) {
      return c->done.load(std::memory_order_acquire);
    });
    const uint64_t before = out.flows_written() + out.samples_written();
    for (auto& c : ctxs) {
      out.drain(*c->worker);
      c->worker->commit_ahead();
    }
    if (all_done) break;  // the drain above came after every finish()
    progress.maybe_print(ctxs);
    if (out.flows_written() + out.samples_written() == before) usleep(200);
  }
  rte_eal_mp_wait_lcore();
}

// The summary and the `dpdk:` lines of the workers: packets, time, polling CPU, page faults.
void print_totals(const std::vector<std::unique_ptr<WorkerCtx>>& ctxs, const Clock& clock,
                  unsigned nb_workers, Collector& out) {
  std::vector<const Worker*> workers;
  uint64_t rx_packets = 0;
  uint64_t filtered = 0;
  uint64_t first_tsc = UINT64_MAX;
  uint64_t last_tsc = 0;
  double cpu_s = 0;
  uint64_t page_faults = 0;
  uint64_t committed_ahead = 0;
  for (const auto& c : ctxs) {
    cpu_s += c->cpu_s;
    page_faults += c->page_faults;
    committed_ahead += c->worker->loss_states_committed();
    workers.push_back(c->worker.get());
    rx_packets += c->rx_packets.load();
    filtered += c->filtered.load();
    if (c->queues.empty()) continue;
    first_tsc = std::min(first_tsc, c->start_tsc);
    last_tsc = std::max(last_tsc, c->end_tsc);
  }
  const double elapsed_s = last_tsc > first_tsc ? static_cast<double>(last_tsc - first_tsc) /
                                                      static_cast<double>(clock.tsc_hz)
                                                : 0.0;
  out.flush();
  out.set_elapsed(elapsed_s);
  out.print_summary(stderr, workers);
  std::fprintf(
      stderr,
      "dpdk: %llu packets received (%llu rejected by the filter) in %.3f s: %.3f Mpps on %u "
      "worker%s; polling CPU time %.3f s: %.3f Mpps per CPU-second\n",
      static_cast<unsigned long long>(rx_packets), static_cast<unsigned long long>(filtered),
      elapsed_s, elapsed_s > 0 ? static_cast<double>(rx_packets) / elapsed_s / 1e6 : 0.0,
      nb_workers, nb_workers == 1 ? "" : "s", cpu_s,
      cpu_s > 0 ? static_cast<double>(rx_packets) / cpu_s / 1e6 : 0.0);
  // Several workers: each one's share (an uneven split by RSS or by --queues-by-flow shows here).
  for (size_t w = 0; ctxs.size() > 1 && w < ctxs.size(); ++w) {
    const WorkerCtx& c = *ctxs[w];
    const uint64_t rx = c.rx_packets.load();
    std::fprintf(stderr,
                 "dpdk: worker %zu: %llu packets from %zu queue%s; polling CPU time %.3f s: %.3f "
                 "Mpps per CPU-second\n",
                 w, static_cast<unsigned long long>(rx), c.queues.size(),
                 c.queues.size() == 1 ? "" : "s", c.cpu_s,
                 c.cpu_s > 0 ? static_cast<double>(rx) / c.cpu_s / 1e6 : 0.0);
  }
  // Page faults on the packet path stall a live port's queues: the table and the LossStates
  // ahead of use are committed outside it (prefault at start, then commit_ahead()).
  std::fprintf(stderr,
               "dpdk: %llu page faults on the polling threads while polling; LossState memory "
               "committed for %llu directions\n",
               static_cast<unsigned long long>(page_faults),
               static_cast<unsigned long long>(committed_ahead));
}

}  // namespace

SourceStatus run_dpdk_source(const std::vector<std::string>& eal_args, const SourceOptions& opts,
                             Collector& out, std::string& error) {
  EalSession session;
  if (const SourceStatus s = start_eal(eal_args, session, error); s != SourceStatus::kOk) return s;
  const unsigned worker_lcores = rte_lcore_count() - 1;
  const unsigned nb_workers = std::max(1u, worker_lcores);

  Clock clock;
  clock.tsc_hz = std::max<uint64_t>(1, rte_get_tsc_hz());
  clock.tsc0 = rte_rdtsc();
  clock.epoch_ns0 = realtime_ns();
  clock.ts_offset = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
  const int ts_bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
  if (clock.ts_offset >= 0 && ts_bit >= 0) clock.ts_flag = uint64_t{1} << ts_bit;

  if (const SourceStatus s = setup_ports(session, nb_workers, opts.filter, error);
      s != SourceStatus::kOk)
    return s;

  std::atomic<bool> stop{false};
  const bool burst_clock = std::any_of(session.ports.begin(), session.ports.end(),
                                       [](const PortState& p) { return !p.pcap_timestamps; });
  if (burst_clock) {
    std::fprintf(stderr,
                 "dpdk: live ports give one timestamp per receive burst, not per packet: RTT "
                 "samples under %u us are not emitted (counted as rtt_unmeasurable); "
                 "--interface IF reads a Linux interface with per-packet kernel timestamps\n",
                 kBurstClockResolutionUs);
  }
  std::vector<std::unique_ptr<WorkerCtx>> ctxs =
      make_workers(session, opts, nb_workers, burst_clock, clock, stop);
  if (worker_lcores > 1 && !opts.queues_by_flow &&
      std::none_of(session.ports.begin(), session.ports.end(),
                   [](const PortState& p) { return p.rss; })) {
    std::fprintf(stderr,
                 "dpdk: no port has RSS: only worker 0 receives packets; %u lcore(s) idle "
                 "(--queues-by-flow when each queue holds whole connections)\n",
                 worker_lcores - 1);
  }
  if (worker_lcores > 1 && opts.queues_by_flow) {
    const auto idle =
        std::count_if(ctxs.begin(), ctxs.end(), [](const auto& c) { return c->queues.empty(); });
    if (idle > 0) {
      std::fprintf(stderr,
                   "dpdk: --queues-by-flow: %u worker(s) of %u poll no queue (queue q goes to "
                   "worker q mod workers; give as many queues as workers)\n",
                   static_cast<unsigned>(idle), nb_workers);
    }
  }

  StopSignals stop_signals;
  Progress progress;
  progress.enabled = opts.progress;
  progress.hz = clock.tsc_hz;
  progress.last_tsc = rte_rdtsc();
  if (worker_lcores == 0) {
    run_on_main_lcore(*ctxs[0], out, stop_signals, progress, ctxs);
  } else {
    run_on_worker_lcores(ctxs, out, stop_signals, stop, progress);
  }
  stop_signals.restore();

  print_totals(ctxs, clock, nb_workers, out);
  print_port_stats(session.ports);
  return SourceStatus::kOk;
}

}  // namespace spand
