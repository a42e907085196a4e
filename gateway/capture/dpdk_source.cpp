// DPDK port source. EAL convention: `spand-gateway [EAL args] -- [gateway options]`.
// One Worker per worker lcore; worker w polls rx queue w of every port, so with the same symmetric
// RSS key on every multi-queue port both directions of a connection meet in one flow table, even
// when a tap splits the directions over two ports. Single-queue ports (net_pcap, net_af_packet
// without fanout, NICs without RSS) are polled by worker 0 alone. The main lcore drains the
// workers' rings into the Collector. See README, "spand-gateway on DPDK ports".
#include <pcap/pcap.h>
// DPDK 22.11 headers trip -Wvolatile and -Wshadow under C++20; they are not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wvolatile"
#pragma GCC diagnostic ignored "-Wshadow"
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#pragma GCC diagnostic pop
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "capture/collector.hpp"
#include "capture/source.hpp"
#include "capture/stop_signals.hpp"

namespace spand {
namespace {

constexpr uint16_t kRxBurst = 32;
constexpr uint16_t kRxDescriptors = 1024;
constexpr uint16_t kTxDescriptors = 512;
constexpr unsigned kMbufCache = 256;
constexpr unsigned kMinPoolMbufs = 8191;  // a power of two minus one suits the ring mempool
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
// Symmetric Toeplitz key (Woo and Park): 0x6d5a repeated makes hash(a->b) == hash(b->a).
constexpr uint8_t kSymmetricKeyPattern[2] = {0x6d, 0x5a};
constexpr uint8_t kDefaultRssKeyBytes = 40;

// A --vdev argument from the EAL command line: net_pcap vdevs tell us the file behind a port.
struct VdevSpec {
  std::string name;     // "net_pcap0"
  std::string rx_pcap;  // first rx_pcap= file, empty if none
  bool infinite_rx = false;
  // From the file itself:
  int dlt = DLT_EN10MB;
  uint64_t packets = 0;     // records (counted for infinite_rx only)
  uint32_t max_caplen = 0;  // largest record (counted for infinite_rx only)
};

std::vector<VdevSpec> parse_vdevs(const std::vector<std::string>& eal_args) {
  std::vector<VdevSpec> out;
  for (size_t i = 0; i < eal_args.size(); ++i) {
    std::string spec;
    if (eal_args[i] == "--vdev" && i + 1 < eal_args.size()) {
      spec = eal_args[++i];
    } else if (eal_args[i].rfind("--vdev=", 0) == 0) {
      spec = eal_args[i].substr(7);
    } else {
      continue;
    }
    VdevSpec v;
    size_t pos = spec.find(',');
    v.name = spec.substr(0, pos);
    while (pos != std::string::npos) {
      const size_t next = spec.find(',', pos + 1);
      const std::string kv =
          spec.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
      if (kv.rfind("rx_pcap=", 0) == 0 && v.rx_pcap.empty()) v.rx_pcap = kv.substr(8);
      if (kv.rfind("infinite_rx=", 0) == 0) v.infinite_rx = std::atoi(kv.c_str() + 12) > 0;
      pos = next;
    }
    out.push_back(std::move(v));
  }
  return out;
}

struct PortState {
  uint16_t port_id = 0;
  std::string name;
  std::string driver;
  uint16_t rx_queues = 1;
  bool rss = false;
  bool replay = false;           // a finite file: the input ends
  bool infinite_rx = false;      // net_pcap replaying its file in a loop
  bool pcap_timestamps = false;  // net_pcap: mbuf rx timestamp = pcap record time in microseconds
  int dlt = DLT_EN10MB;
  LinkType link = LinkType::kEthernet;
  uint64_t file_packets = 0;  // records in the rx_pcap file (infinite_rx preloads them all)
  uint32_t max_caplen = 0;
  bool has_filter = false;
  bpf_program filter{};
  rte_mempool* pool = nullptr;
  bool started = false;
};

struct QueueRef {
  const PortState* port = nullptr;
  uint16_t queue = 0;
  uint64_t last_rx_tsc = 0;
  bool exhausted = false;
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
        if (q.queue == 0 && rte_eth_stats_get(q.port->port_id, &st) == 0)
          lost += st.imissed + st.rx_nombuf;
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

// Owns what the EAL session created, so every error path releases it.
class EalSession {
 public:
  ~EalSession() {
    for (PortState& p : ports) {
      if (p.started) rte_eth_dev_stop(p.port_id);
      rte_eth_dev_close(p.port_id);
      if (p.has_filter) pcap_freecode(&p.filter);
    }
    if (eal_up) rte_eal_cleanup();
  }
  bool eal_up = false;
  std::vector<PortState> ports;
};

// Opens the rx_pcap file before the EAL does, for a clear message when it is missing, and for
// its link type (net_pcap hands over the bytes whatever the link type). For infinite_rx it also
// counts the records: the driver keeps every one of them in an mbuf of our pool.
bool inspect_pcap_file(VdevSpec& v, std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pc = pcap_open_offline(v.rx_pcap.c_str(), errbuf);
  if (pc == nullptr) {
    error = v.name + ": cannot read rx_pcap " + v.rx_pcap + ": " + errbuf;
    return false;
  }
  v.dlt = pcap_datalink(pc);
  LinkType link;
  if (!link_type_from_dlt(v.dlt, link)) {
    const char* dlt_name = pcap_datalink_val_to_name(v.dlt);
    error = v.name + ": " + v.rx_pcap + ": unsupported link type " + std::to_string(v.dlt) + " (" +
            (dlt_name != nullptr ? dlt_name : "?") +
            "); supported: Ethernet, Linux SLL/SLL2, raw IP";
    pcap_close(pc);
    return false;
  }
  if (v.infinite_rx) {
    pcap_pkthdr* hdr = nullptr;
    const u_char* bytes = nullptr;
    while (pcap_next_ex(pc, &hdr, &bytes) == 1) {
      ++v.packets;
      v.max_caplen = std::max(v.max_caplen, hdr->caplen);
    }
  }
  pcap_close(pc);
  return true;
}

bool compile_filter(PortState& p, const std::string& expr, std::string& error) {
  if (expr.empty()) return true;
  pcap_t* dead = pcap_open_dead(p.dlt, 65535);
  if (dead == nullptr) {
    error = "cannot compile the filter: pcap_open_dead failed";
    return false;
  }
  if (pcap_compile(dead, &p.filter, expr.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0) {
    error = "bad --filter '" + expr + "': " + pcap_geterr(dead);
    pcap_close(dead);
    return false;
  }
  pcap_close(dead);
  p.has_filter = true;
  return true;
}

bool setup_port(PortState& p, unsigned workers, std::string& error) {
  const std::string where = "port " + std::to_string(p.port_id) + " (" + p.name + ")";
  rte_eth_dev_info info{};
  int rc = rte_eth_dev_info_get(p.port_id, &info);
  if (rc != 0) {
    error = where + ": rte_eth_dev_info_get: " + rte_strerror(-rc);
    return false;
  }
  p.driver = info.driver_name != nullptr ? info.driver_name : "?";
  p.rss = info.flow_type_rss_offloads != 0 && info.max_rx_queues > 1 && workers > 1;
  if (p.rss) {
    p.rx_queues = static_cast<uint16_t>(std::min<unsigned>(workers, info.max_rx_queues));
  } else if (p.driver == "net_pcap") {
    p.rx_queues = std::max<uint16_t>(1, info.max_rx_queues);  // one queue per rx_pcap file
  } else {
    p.rx_queues = 1;
  }
  // Nothing is sent, but some drivers (net_tap) insist on as many tx queues as rx queues.
  const uint16_t tx_queues = std::min(p.rx_queues, info.max_tx_queues);

  rte_eth_conf conf{};
  std::vector<uint8_t> key;
  if (p.rss) {
    key.resize(info.hash_key_size != 0 ? info.hash_key_size : kDefaultRssKeyBytes);
    for (size_t i = 0; i < key.size(); ++i) key[i] = kSymmetricKeyPattern[i % 2];
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = key.data();
    conf.rx_adv_conf.rss_conf.rss_key_len = static_cast<uint8_t>(key.size());
    conf.rx_adv_conf.rss_conf.rss_hf =
        (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
  }
  rc = rte_eth_dev_configure(p.port_id, p.rx_queues, tx_queues, &conf);
  if (rc != 0) {
    error = where + ": rte_eth_dev_configure: " + rte_strerror(-rc);
    return false;
  }
  uint16_t rxd = kRxDescriptors;
  uint16_t txd = kTxDescriptors;
  rte_eth_dev_adjust_nb_rx_tx_desc(p.port_id, &rxd, &txd);

  // infinite_rx keeps the whole file in mbufs of this pool, on top of what rx needs; its mbufs
  // are sized to the file's largest frame (the driver refuses chained mbufs there anyway).
  const uint64_t in_flight =
      uint64_t{p.rx_queues} * rxd + uint64_t{workers + 1} * (kMbufCache + kRxBurst);
  const uint64_t mbufs =
      std::max<uint64_t>(kMinPoolMbufs, in_flight + (p.infinite_rx ? p.file_packets : 0));
  uint32_t data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
  if (p.infinite_rx) {
    data_room =
        std::min<uint32_t>(UINT16_MAX, RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(p.max_caplen, 64));
  }
  const std::string pool_name = "spand_rx" + std::to_string(p.port_id);
  const int socket = rte_eth_dev_socket_id(p.port_id);
  p.pool = rte_pktmbuf_pool_create(pool_name.c_str(), static_cast<unsigned>(mbufs), kMbufCache, 0,
                                   static_cast<uint16_t>(data_room), socket);
  if (p.pool == nullptr) {
    error = where + ": cannot create a pool of " + std::to_string(mbufs) +
            " mbufs: " + rte_strerror(rte_errno) + " (give the EAL more memory with -m)";
    return false;
  }
  for (uint16_t q = 0; q < p.rx_queues; ++q) {
    rc = rte_eth_rx_queue_setup(p.port_id, q, rxd, socket, &info.default_rxconf, p.pool);
    if (rc != 0) {
      error = where + ": rte_eth_rx_queue_setup(" + std::to_string(q) + "): " + rte_strerror(-rc);
      return false;
    }
  }
  for (uint16_t q = 0; q < tx_queues; ++q) {
    rc = rte_eth_tx_queue_setup(p.port_id, q, txd, socket, nullptr);
    if (rc != 0) {
      error = where + ": rte_eth_tx_queue_setup(" + std::to_string(q) + "): " + rte_strerror(-rc);
      return false;
    }
  }
  rte_eth_promiscuous_enable(p.port_id);  // a span port receives frames for other MACs
  rc = rte_eth_dev_start(p.port_id);
  if (rc != 0) {
    error = where + ": rte_eth_dev_start: " + rte_strerror(-rc);
    return false;
  }
  p.started = true;
  return true;
}

void print_progress(const std::vector<std::unique_ptr<WorkerCtx>>& ctxs, uint64_t& last_packets,
                    uint64_t& last_tsc, uint64_t hz) {
  uint64_t packets = 0;
  for (const auto& c : ctxs) packets += c->rx_packets.load(std::memory_order_relaxed);
  const uint64_t now = rte_rdtsc();
  const double secs = static_cast<double>(now - last_tsc) / static_cast<double>(hz);
  std::fprintf(stderr, "dpdk: %llu packets, %.3f Mpps\n", static_cast<unsigned long long>(packets),
               secs > 0 ? static_cast<double>(packets - last_packets) / secs / 1e6 : 0.0);
  last_packets = packets;
  last_tsc = now;
}

void print_port_stats(const std::vector<PortState>& ports) {
  for (const PortState& p : ports) {
    rte_eth_stats st{};
    if (rte_eth_stats_get(p.port_id, &st) != 0) continue;
    std::fprintf(
        stderr,
        "dpdk: port %u %s (%s, %u rx queue%s%s): ipackets %llu imissed %llu ierrors %llu "
        "rx_nombuf %llu\n",
        p.port_id, p.name.c_str(), p.driver.c_str(), p.rx_queues, p.rx_queues == 1 ? "" : "s",
        p.rss ? ", symmetric RSS" : "", static_cast<unsigned long long>(st.ipackets),
        static_cast<unsigned long long>(st.imissed), static_cast<unsigned long long>(st.ierrors),
        static_cast<unsigned long long>(st.rx_nombuf));
  }
}

}  // namespace

SourceStatus run_dpdk_source(const std::vector<std::string>& eal_args, const SourceOptions& opts,
                             Collector& out, std::string& error) {
  EalSession session;
  std::vector<VdevSpec> vdevs = parse_vdevs(eal_args);
  for (VdevSpec& v : vdevs) {
    if (!v.rx_pcap.empty() && !inspect_pcap_file(v, error)) return SourceStatus::kBadInput;
  }
  std::vector<std::string> arg_copy = eal_args;
  if (arg_copy.empty()) arg_copy.emplace_back("spand-gateway");
  std::vector<char*> argv;
  for (std::string& a : arg_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) < 0) {
    error = std::string("EAL initialization failed: ") + rte_strerror(rte_errno) +
            " (check the EAL arguments before \"--\")";
    return SourceStatus::kBadInput;
  }
  session.eal_up = true;

  const uint16_t nb_ports = rte_eth_dev_count_avail();
  if (nb_ports == 0) {
    error = vdevs.empty() ? "no DPDK ports: bind a NIC to a DPDK driver or give --vdev "
                            "net_pcap0,rx_pcap=FILE"
                          : "no DPDK ports: the --vdev devices failed to probe (see the EAL "
                            "messages above)";
    return SourceStatus::kBadInput;
  }
  const unsigned worker_lcores = rte_lcore_count() - 1;
  const unsigned nb_workers = std::max(1u, worker_lcores);

  Clock clock;
  clock.tsc_hz = std::max<uint64_t>(1, rte_get_tsc_hz());
  clock.tsc0 = rte_rdtsc();
  clock.epoch_ns0 = realtime_ns();
  clock.ts_offset = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
  const int ts_bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
  if (clock.ts_offset >= 0 && ts_bit >= 0) clock.ts_flag = uint64_t{1} << ts_bit;

  session.ports.reserve(nb_ports);
  uint16_t port_id = 0;
  RTE_ETH_FOREACH_DEV(port_id) {
    PortState& p = session.ports.emplace_back();
    p.port_id = port_id;
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(port_id, name);
    p.name = name;
    for (const VdevSpec& v : vdevs) {
      if (v.name != p.name || v.rx_pcap.empty()) continue;
      p.dlt = v.dlt;
      link_type_from_dlt(v.dlt, p.link);
      p.file_packets = v.packets;
      p.max_caplen = v.max_caplen;
      p.replay = !v.infinite_rx;
      p.infinite_rx = v.infinite_rx;
      p.pcap_timestamps = true;
    }
    if (!compile_filter(p, opts.filter, error)) return SourceStatus::kBadInput;
    if (!setup_port(p, nb_workers, error)) return SourceStatus::kRuntimeError;
  }

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<WorkerCtx>> ctxs;
  const bool burst_clock = std::any_of(session.ports.begin(), session.ports.end(),
                                       [](const PortState& p) { return !p.pcap_timestamps; });
  if (burst_clock) {
    std::fprintf(stderr,
                 "dpdk: live ports give one timestamp per receive burst, not per packet: RTT "
                 "samples under %u us are not emitted (counted as rtt_unmeasurable); "
                 "--interface IF reads a Linux interface with per-packet kernel timestamps\n",
                 kBurstClockResolutionUs);
  }
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
      // RSS port: worker w owns queue w. Other ports: worker 0 owns every queue, since nothing
      // splits their connections by hash.
      const uint16_t first = p.rss ? static_cast<uint16_t>(w) : 0;
      const uint16_t last = p.rss ? static_cast<uint16_t>(w + 1) : (w == 0 ? p.rx_queues : 0);
      for (uint16_t q = first; q < last && q < p.rx_queues; ++q) {
        c->queues.push_back(QueueRef{&p, q, 0, false});
        c->all_replay = c->all_replay && p.replay;
        c->host_clock = c->host_clock || !p.pcap_timestamps;
      }
    }
    ctxs.push_back(std::move(c));
  }
  if (worker_lcores > 1 && std::none_of(session.ports.begin(), session.ports.end(),
                                        [](const PortState& p) { return p.rss; })) {
    std::fprintf(stderr,
                 "dpdk: no port has RSS: only worker 0 receives packets; %u lcore(s) idle\n",
                 worker_lcores - 1);
  }

  StopSignals stop_signals;

  uint64_t progress_packets = 0;
  uint64_t progress_tsc = rte_rdtsc();
  auto maybe_progress = [&] {
    if (opts.progress && rte_rdtsc() - progress_tsc >= clock.tsc_hz) {
      print_progress(ctxs, progress_packets, progress_tsc, clock.tsc_hz);
    }
  };

  if (worker_lcores == 0) {
    // Only the main lcore: it polls and drains in turn.
    WorkerCtx& c = *ctxs[0];
    const double cpu0 = thread_cpu_seconds();
    const uint64_t faults0 = thread_page_faults();
    start_queues(c);
    uint64_t passes = 0;
    while (!stop_signals.requested() && !c.input_exhausted()) {
      poll_once(c);
      if (++passes % 64 == 0 || rings_need_drain(*c.worker)) {
        out.drain(*c.worker);
        c.worker->commit_ahead();  // here between bursts, not at a fault in one
        maybe_progress();
      }
    }
    c.end_tsc = end_of_input_tsc(c);
    c.cpu_s = thread_cpu_seconds() - cpu0;
    c.page_faults = thread_page_faults() - faults0;
    while (c.worker->finish_some(c.worker->finish_batch())) out.drain(*c.worker);
    out.drain(*c.worker);
  } else {
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
      maybe_progress();
      if (out.flows_written() + out.samples_written() == before) usleep(200);
    }
    rte_eal_mp_wait_lcore();
  }
  stop_signals.restore();

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
  // Page faults on the packet path stall a live port's queues: the table and the LossStates
  // ahead of use are committed outside it (prefault at start, then commit_ahead()).
  std::fprintf(stderr,
               "dpdk: %llu page faults on the polling threads while polling; LossState memory "
               "committed for %llu directions\n",
               static_cast<unsigned long long>(page_faults),
               static_cast<unsigned long long>(committed_ahead));
  print_port_stats(session.ports);
  return SourceStatus::kOk;
}

}  // namespace spand
