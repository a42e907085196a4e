// Packet sources: libpcap files (no EAL) and DPDK ports. Both feed Workers and hand their rings to
// the Collector on the control side, so both paths produce the same outputs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dataplane/worker.hpp"

namespace spand {

class Collector;

// A live interface read through libpcap (TPACKET_V3 ring, per-packet kernel timestamps in ns).
struct LiveOptions {
  std::string interface;           // e.g. a span port or the mirror of a veth
  uint32_t buffer_mb = 64;         // the kernel ring; drops are counted, never silent
  uint32_t snaplen = 256;          // headers only: Ethernet + IPv6 + TCP with options fit in 134
  uint32_t block_timeout_ms = 10;  // a ring block is handed over at least this often
  bool promisc = true;
  std::string tstamp_type;  // "" = the default (host); "adapter", "adapter_unsynced", ...
  uint32_t duration_s = 0;  // 0 = until SIGINT/SIGTERM
};

struct SourceOptions {
  std::string filter;  // libpcap filter expression, empty = everything
  LiveOptions live;
  WorkerConfig worker;    // per-worker table sizes and timeouts
  bool progress = false;  // print progress to stderr on long inputs
  // --pcap: 1 = one thread reads, tracks and writes; 2 = the file is read, parsed and the
  // records written on one thread and the connections tracked on another (the same outputs);
  // 0 = 2 when the machine has two cores or more and the outputs' order does not depend on
  // when the rings are drained (Collector::order_sensitive()), else 1.
  unsigned pcap_threads = 0;
  // DPDK: the rx queues of ports without RSS already hold whole connections, split by flow alike
  // on every port (e.g. several rx_pcap files of one capture split by a symmetric hash): queue q
  // goes to worker q mod workers, as an RSS queue does. false: worker 0 polls them all.
  bool queues_by_flow = false;
};

// Outcome of a source run; exit code for main().
// kCaptureLoss: the run completed but the kernel or the NIC dropped frames before the gateway
// saw them, or the interface went away for a while (the results miss those packets).
enum class SourceStatus : int { kOk = 0, kBadInput = 2, kRuntimeError = 3, kCaptureLoss = 4 };

// libpcap's DLT_ value (pcap_datalink()) to the link types parse_frame() decodes; false when
// it decodes none of them. They differ only for raw IP (DLT_RAW is 12 on Linux, LINKTYPE_RAW
// 101 in files).
bool link_type_from_dlt(int dlt, LinkType& out);
// The link types link_type_from_dlt() accepts, for error messages.
inline constexpr const char* kSupportedLinkTypes =
    "Ethernet, Linux SLL/SLL2, raw IP, BSD loopback (NULL/LOOP)";

// Compiles and sets a libpcap filter on an open handle (nothing for an empty filter); false with
// a message naming the filter.
bool set_pcap_filter(struct pcap* pc, const std::string& filter, std::string& error);

// Reads a pcap or pcapng file with libpcap. `error` gets a one-line message on failure.
SourceStatus run_pcap_source(const std::string& path, const SourceOptions& opts, Collector& out,
                             std::string& error);
// The same on a capture libpcap has opened (pcap_fopen_offline on memory, for the fuzz target
// tests/fuzz/fuzz_pcap.cpp); takes ownership of `pc`; `path` names it in messages; the exit
// summary goes to `summary` (nullptr: none).
SourceStatus read_pcap(struct pcap* pc, const std::string& path, const SourceOptions& opts,
                       Collector& out, std::string& error, FILE* summary);

// Reads a live interface with libpcap until SIGINT/SIGTERM (or live.duration_s). The worker's
// clock follows the host clock between packets (Worker::advance_time), so timeouts fire on a
// quiet link. If the interface goes down, says so and reopens it every second, keeping the flow
// table.
SourceStatus run_live_source(const SourceOptions& opts, Collector& out, std::string& error);

// Reads DPDK ports: `eal_args` are the arguments before "--" (argv[0] included). One worker per
// rx queue, each on its own lcore; the main lcore runs the Collector.
SourceStatus run_dpdk_source(const std::vector<std::string>& eal_args, const SourceOptions& opts,
                             Collector& out, std::string& error);

}  // namespace spand
