// libFuzzer target: the capture-file reader (gateway/capture/pcap_file_source.cpp) on one file
// image: libpcap opens it from memory (pcap or pcapng), then the gateway's read loop, link type
// check, worker and collector run as for --pcap, the flow and sample records (JSON Lines), the
// exit summary and the prefix summary written to /dev/null.
// Properties: the reader returns ok or bad input (never a runtime error), with a message exactly
// when the input is bad; no record is lost (/dev/null takes everything).
#include <pcap/pcap.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "capture/collector.hpp"
#include "capture/source.hpp"
#include "fuzz_check.hpp"

using namespace spand;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;  // fmemopen refuses an empty buffer
  // fmemopen reads the caller's bytes in place; "rb" never writes them.
  FILE* f = fmemopen(const_cast<uint8_t*>(data), size, "rb");
  if (!f) return 0;
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* pc = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (!pc) {
    std::fclose(f);  // libpcap closes the stream only once it has opened it
    return 0;
  }
  SourceOptions opts;
  opts.worker.flow_capacity = 64;
  opts.worker.ring_capacity = 256;
  static FILE* const devnull = std::fopen("/dev/null", "w");
  FUZZ_CHECK(devnull != nullptr);
  OutputOptions out_opts;
  out_opts.flows_path = "/dev/null";
  out_opts.samples_path = "/dev/null";
  Collector collector(out_opts);
  std::string error;
  FUZZ_CHECK(collector.open(error));
  const SourceStatus st = read_pcap(pc, "fuzz", opts, collector, error, devnull);  // closes pc
  collector.print_prefix_summary(devnull);
  FUZZ_CHECK(st == SourceStatus::kOk || st == SourceStatus::kBadInput);
  FUZZ_CHECK((st == SourceStatus::kOk) == error.empty());
  FUZZ_CHECK(!collector.output_failed());
  return 0;
}
