// DPDK port setup for the DPDK source (dpdk_source.cpp): the EAL session, net_pcap vdevs and the
// files behind them, and each port's queues, mbuf pool and symmetric RSS. Private to the two
// files; everything here runs before the worker lcores start or after they stopped.
#pragma once

#include <pcap/pcap.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/source.hpp"
#include "dataplane/packet.hpp"

struct rte_mempool;

namespace spand {

// Frames per rte_eth_rx_burst: the lcore loop's burst, and part of the mbufs a port keeps in
// flight. The worker tracks each burst's frames at its end (Worker::flush_staged()), so this is
// also the pipeline's length: Worker::kBurst.
constexpr uint16_t kRxBurst = 128;

// A --vdev argument from the EAL command line: net_pcap vdevs tell us the file behind a port.
struct VdevSpec {
  std::string name;                   // "net_pcap0"
  std::vector<std::string> rx_pcaps;  // its rx_pcap= files, one rx queue each (none: not a file)
  bool infinite_rx = false;
  // From the files themselves (all must have the same link type):
  int dlt = DLT_EN10MB;
  uint64_t packets = 0;     // records in all of them (counted for infinite_rx only)
  uint32_t max_caplen = 0;  // largest record (counted for infinite_rx only)
};

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
  uint64_t file_packets = 0;  // records in the rx_pcap files (infinite_rx preloads them all)
  uint32_t max_caplen = 0;
  bool has_filter = false;
  bpf_program filter{};
  rte_mempool* pool = nullptr;
  bool started = false;
};

// Owns what the EAL session created, so every error path releases it.
class EalSession {
 public:
  EalSession() = default;
  EalSession(const EalSession&) = delete;
  EalSession& operator=(const EalSession&) = delete;
  ~EalSession();
  bool eal_up = false;
  std::vector<VdevSpec> vdevs;  // from the EAL arguments, their files inspected
  std::vector<PortState> ports;
};

// Inspects the net_pcap vdevs' files (a clear message when one is missing or has a link type
// parse_frame() does not decode), then starts the EAL. kBadInput with `error` set on failure,
// also when the EAL finds no port.
SourceStatus start_eal(const std::vector<std::string>& eal_args, EalSession& session,
                       std::string& error);

// Configures and starts every port the EAL found, for `workers` worker lcores: rx queues (one per
// worker with RSS), a symmetric RSS key, the mbuf pool, promiscuous mode, and `filter` compiled
// for the port's link type. kBadInput for a bad filter, kRuntimeError when DPDK refuses a step.
SourceStatus setup_ports(EalSession& session, unsigned workers, const std::string& filter,
                         std::string& error);

// The `dpdk: port ...` lines at exit: each port's receive and drop counters.
void print_port_stats(const std::vector<PortState>& ports);

}  // namespace spand
