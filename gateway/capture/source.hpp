// Packet sources: libpcap files (no EAL) and DPDK ports. Both feed Workers and hand their rings to
// the Collector on the control side, so both paths produce the same outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/worker.hpp"

namespace spand {

class Collector;

struct SourceOptions {
  std::string filter;     // libpcap filter expression, empty = everything
  WorkerConfig worker;    // per-worker table sizes and timeouts
  bool progress = false;  // print progress to stderr on long inputs
};

// Outcome of a source run; exit code for main().
enum class SourceStatus : int { kOk = 0, kBadInput = 2, kRuntimeError = 3 };

// libpcap's DLT_ value (pcap_datalink()) to the link types parse_frame() decodes; false when
// it decodes none of them. They differ only for raw IP (DLT_RAW is 12 on Linux, LINKTYPE_RAW
// 101 in files).
bool link_type_from_dlt(int dlt, LinkType& out);

// Reads a pcap or pcapng file with libpcap. `error` gets a one-line message on failure.
SourceStatus run_pcap_source(const std::string& path, const SourceOptions& opts, Collector& out,
                             std::string& error);

// Reads DPDK ports: `eal_args` are the arguments before "--" (argv[0] included). One worker per
// rx queue, each on its own lcore; the main lcore runs the Collector.
SourceStatus run_dpdk_source(const std::vector<std::string>& eal_args, const SourceOptions& opts,
                             Collector& out, std::string& error);

}  // namespace spand
