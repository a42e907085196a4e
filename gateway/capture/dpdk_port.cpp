// DPDK port setup: the net_pcap vdevs on the EAL command line and the files behind them, the
// EAL start, and each port's queues, mbuf pool, symmetric RSS key and filter (dpdk_port.hpp). The
// lcore loop that polls the ports is in dpdk_source.cpp.
#include "capture/dpdk_port.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "capture/dpdk_headers.hpp"

namespace spand {
namespace {

constexpr uint16_t kRxDescriptors = 1024;
constexpr uint16_t kTxDescriptors = 512;
constexpr unsigned kMbufCache = 256;
constexpr unsigned kMinPoolMbufs = 8191;  // a power of two minus one suits the ring mempool
// Symmetric Toeplitz key (Woo and Park): 0x6d5a repeated makes hash(a->b) == hash(b->a).
constexpr uint8_t kSymmetricKeyPattern[2] = {0x6d, 0x5a};
constexpr uint8_t kDefaultRssKeyBytes = 40;

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
      if (kv.rfind("rx_pcap=", 0) == 0) v.rx_pcaps.push_back(kv.substr(8));
      if (kv.rfind("infinite_rx=", 0) == 0) v.infinite_rx = std::atoi(kv.c_str() + 12) > 0;
      pos = next;
    }
    out.push_back(std::move(v));
  }
  return out;
}

// Opens the rx_pcap files before the EAL does, for a clear message when one is missing, and for
// their link type (net_pcap hands over the bytes whatever the link type; a port's files must
// share one). For infinite_rx it also counts the records: the driver keeps every one of them in
// an mbuf of our pool.
bool inspect_pcap_files(VdevSpec& v, std::string& error) {
  for (size_t i = 0; i < v.rx_pcaps.size(); ++i) {
    const std::string& path = v.rx_pcaps[i];
    char errbuf[PCAP_ERRBUF_SIZE] = {};
    const std::unique_ptr<pcap_t, decltype(&pcap_close)> pc(pcap_open_offline(path.c_str(), errbuf),
                                                            &pcap_close);
    if (pc == nullptr) {
      error = v.name + ": cannot read rx_pcap " + path + ": " + errbuf;
      return false;
    }
    const int dlt = pcap_datalink(pc.get());
    LinkType link;
    if (!link_type_from_dlt(dlt, link)) {
      const char* dlt_name = pcap_datalink_val_to_name(dlt);
      error = v.name + ": " + path + ": unsupported link type " + std::to_string(dlt) + " (" +
              (dlt_name != nullptr ? dlt_name : "?") + "); supported: " + kSupportedLinkTypes;
      return false;
    }
    if (i > 0 && dlt != v.dlt) {
      error = v.name + ": " + path + ": link type " + std::to_string(dlt) + ", not " +
              std::to_string(v.dlt) + " as " + v.rx_pcaps[0] +
              ": a port's rx_pcap files must share one";
      return false;
    }
    v.dlt = dlt;
    if (v.infinite_rx) {
      pcap_pkthdr* hdr = nullptr;
      const u_char* bytes = nullptr;
      while (pcap_next_ex(pc.get(), &hdr, &bytes) == 1) {
        ++v.packets;
        v.max_caplen = std::max(v.max_caplen, hdr->caplen);
      }
    }
  }
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

}  // namespace

EalSession::~EalSession() {
  for (PortState& p : ports) {
    if (p.started) rte_eth_dev_stop(p.port_id);
    rte_eth_dev_close(p.port_id);
    if (p.has_filter) pcap_freecode(&p.filter);
  }
  if (eal_up) rte_eal_cleanup();
}

SourceStatus start_eal(const std::vector<std::string>& eal_args, EalSession& session,
                       std::string& error) {
  session.vdevs = parse_vdevs(eal_args);
  for (VdevSpec& v : session.vdevs) {
    if (!inspect_pcap_files(v, error)) return SourceStatus::kBadInput;
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
  if (rte_eth_dev_count_avail() == 0) {
    error = session.vdevs.empty() ? "no DPDK ports: bind a NIC to a DPDK driver or give --vdev "
                                    "net_pcap0,rx_pcap=FILE"
                                  : "no DPDK ports: the --vdev devices failed to probe (see the "
                                    "EAL messages above)";
    return SourceStatus::kBadInput;
  }
  return SourceStatus::kOk;
}

SourceStatus setup_ports(EalSession& session, unsigned workers, const std::string& filter,
                         std::string& error) {
  // The lcore loop keeps pointers to these: no reallocation after this.
  session.ports.reserve(rte_eth_dev_count_avail());
  uint16_t port_id = 0;
  RTE_ETH_FOREACH_DEV(port_id) {
    PortState& p = session.ports.emplace_back();
    p.port_id = port_id;
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(port_id, name);
    p.name = name;
    for (const VdevSpec& v : session.vdevs) {
      if (v.name != p.name || v.rx_pcaps.empty()) continue;
      p.dlt = v.dlt;
      link_type_from_dlt(v.dlt, p.link);
      p.file_packets = v.packets;
      p.max_caplen = v.max_caplen;
      p.replay = !v.infinite_rx;
      p.infinite_rx = v.infinite_rx;
      p.pcap_timestamps = true;
    }
    if (!compile_filter(p, filter, error)) return SourceStatus::kBadInput;
    if (!setup_port(p, workers, error)) return SourceStatus::kRuntimeError;
  }
  return SourceStatus::kOk;
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

}  // namespace spand
