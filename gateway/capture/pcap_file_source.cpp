// Capture files through libpcap (pcap and pcapng), no EAL. The worker runs on this thread and
// the Collector drains it every few hundred packets.
#include <pcap/pcap.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>

#include "capture/collector.hpp"
#include "capture/source.hpp"
#include "capture/stop_signals.hpp"

namespace spand {

namespace {

constexpr uint32_t kDrainEvery = 256;  // packets between drains; far below the ring capacity
// Frames per batch handed from the reading thread to the tracking thread (replay_two_threads).
constexpr uint32_t kPreparedBatch = 32;

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
    case DLT_NULL:
      out = LinkType::kNull;
      return true;
    case 108:  // DLT_LOOP (12 on OpenBSD; LINKTYPE_LOOP 108 in files, libpcap maps it here)
      out = LinkType::kLoop;
      return true;
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

namespace {

// What both replay loops share: the open file and how to report.
struct ReadLoop {
  pcap_t* pc;
  const std::string& path;
  LinkType link;
  const SourceOptions& opts;
  StopSignals& stop;
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point last_progress = start;
  uint64_t n = 0;  // frames read

  // The next frame, or false at the end of the file, on a read error (`status`, `error` set) or
  // when a signal asked to stop.
  bool next(pcap_pkthdr*& hdr, const u_char*& data, SourceStatus& status, std::string& error) {
    if (stop.requested()) {
      std::fprintf(stderr,
                   "spand-gateway: stopped by a signal after %" PRIu64
                   " packets; open connections are closed as end_of_capture\n",
                   n);
      return false;
    }
    const int rc = pcap_next_ex(pc, &hdr, &data);
    if (rc == PCAP_ERROR_BREAK) return false;  // end of file
    if (rc != 1) {
      error = path + ": " + pcap_geterr(pc) + " after " + std::to_string(n) +
              " packets; results cover the packets before it";
      status = SourceStatus::kBadInput;
      return false;
    }
    ++n;
    return true;
  }
  void progress(const Worker& worker) {
    if (!opts.progress || n % (1u << 20) != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_progress < std::chrono::seconds(1)) return;
    last_progress = now;
    const double s = std::chrono::duration<double>(now - start).count();
    // From the reading thread: active_flows is a plain read of a counter the worker publishes.
    std::fprintf(stderr, "progress: %" PRIu64 " packets, %.2f Mpps, %" PRIu64 " active\n", n,
                 n / s / 1e6, worker.counters().active_flows);
  }
};

uint64_t ts_ns_of(const pcap_pkthdr* hdr) {
  return uint64_t(hdr->ts.tv_sec) * 1'000'000'000ull + uint64_t(hdr->ts.tv_usec);
}

// One thread reads, parses, tracks and writes.
SourceStatus replay_one_thread(ReadLoop& loop, Worker& worker, Collector& out, std::string& error) {
  SourceStatus status = SourceStatus::kOk;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  while (loop.next(hdr, data, status, error)) {
    worker.stage_frame(loop.link, data, hdr->caplen, hdr->len, ts_ns_of(hdr));
    if (loop.n % kDrainEvery == 0) {
      out.drain(worker);
      loop.progress(worker);
    }
  }
  while (worker.finish_some(worker.finish_batch())) out.drain(worker);  // tracks the staged first
  out.drain(worker);
  return status;
}

// Two threads: this one reads and parses frames (Worker::prepare) into batches and writes the
// records; a second one tracks the batches in order (Worker::handle_prepared). The worker waits
// for room in its output rings before each batch, so no output is lost however far the writer
// lags, and the tracking order is the file's: the same outputs as replay_one_thread().
SourceStatus replay_two_threads(ReadLoop& loop, Worker& worker, Collector& out,
                                std::string& error) {
  constexpr uint32_t kBatch = kPreparedBatch;
  constexpr uint64_t kBatches = 256;  // a power of two; about 2 MB of parsed frames in flight
  struct Batch {
    uint32_t n = 0;
    Worker::Prepared frames[kBatch];
  };
  std::unique_ptr<Batch[]> batches(new Batch[kBatches]);
  alignas(64) std::atomic<uint64_t> published{0};  // batches handed to the tracking thread
  alignas(64) std::atomic<uint64_t> tracked{0};    // batches it is done with
  std::atomic<bool> input_done{false};
  std::atomic<bool> finished{false};

  auto wait_for_room = [&worker](uint32_t samples, uint32_t records) {
    while (worker.samples().room() < samples || worker.flows().room() < records) {
      std::this_thread::yield();
    }
  };
  std::thread tracker([&] {
    uint64_t next = 0;
    for (;;) {
      if (next == published.load(std::memory_order_acquire)) {
        if (input_done.load(std::memory_order_acquire) &&
            next == published.load(std::memory_order_acquire)) {
          break;
        }
        std::this_thread::yield();
        continue;
      }
      const Batch& b = batches[next % kBatches];
      wait_for_room(b.n * Worker::kSampleRoomPerPacket, b.n * Worker::kRecordRoomPerPacket);
      worker.handle_prepared(b.frames, b.n);
      tracked.store(++next, std::memory_order_release);
    }
    // Each finished flow emits one record and at most two samples.
    const uint32_t slice = worker.finish_batch();
    for (bool more = true; more;) {
      wait_for_room(2 * slice, slice);
      more = worker.finish_some(slice);
    }
    finished.store(true, std::memory_order_release);
  });

  SourceStatus status = SourceStatus::kOk;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  uint64_t filling = 0;  // the batch being filled
  auto publish = [&] {
    published.store(++filling, std::memory_order_release);
    // The next batch's memory is free once the tracker is past it; write records meanwhile.
    while (filling - tracked.load(std::memory_order_acquire) >= kBatches) {
      out.drain(worker);
      std::this_thread::yield();
    }
    batches[filling % kBatches].n = 0;
  };
  batches[0].n = 0;
  while (loop.next(hdr, data, status, error)) {
    Batch& b = batches[filling % kBatches];
    worker.prepare(loop.link, data, hdr->caplen, hdr->len, ts_ns_of(hdr), b.frames[b.n]);
    if (++b.n == kBatch) publish();
    if (loop.n % kDrainEvery == 0) {
      out.drain(worker);
      loop.progress(worker);
    }
  }
  if (batches[filling % kBatches].n > 0) publish();
  input_done.store(true, std::memory_order_release);
  while (!finished.load(std::memory_order_acquire)) {
    out.drain(worker);
    std::this_thread::yield();
  }
  tracker.join();
  out.drain(worker);
  return status;
}

// libpcap reads no compressed capture: a file that starts as one gets a hint after libpcap's
// message (stdin cannot be peeked at once libpcap has read it).
std::string compressed_hint(const std::string& path) {
  if (path == "-") return "";
  unsigned char magic[6] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  struct Format {
    const char* name;
    const char* tool;
    std::initializer_list<unsigned char> magic;
  };
  static const Format kFormats[] = {
      {"gzip", "zcat", {0x1f, 0x8b}},
      {"zstd", "zstdcat", {0x28, 0xb5, 0x2f, 0xfd}},
      {"xz", "xzcat", {0xfd, '7', 'z', 'X', 'Z', 0x00}},
      {"bzip2", "bzcat", {'B', 'Z', 'h'}},
      {"lz4", "lz4cat", {0x04, 0x22, 0x4d, 0x18}},
  };
  for (const Format& fmt : kFormats) {
    if (n >= fmt.magic.size() && std::equal(fmt.magic.begin(), fmt.magic.end(), magic)) {
      return std::string(" (the file is ") + fmt.name + "-compressed: " + fmt.tool + " " + path +
             " | spand-gateway --pcap -)";
    }
  }
  return "";
}

}  // namespace

SourceStatus run_pcap_source(const std::string& path, const SourceOptions& opts, Collector& out,
                             std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* pc =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  const std::string name = path == "-" ? "standard input" : path;  // for messages
  if (!pc) {
    error = name + ": " + errbuf + compressed_hint(path);
    return SourceStatus::kBadInput;
  }
  return read_pcap(pc, name, opts, out, error, stderr);
}

SourceStatus read_pcap(pcap_t* pc, const std::string& path, const SourceOptions& opts,
                       Collector& out, std::string& error, FILE* summary) {
  LinkType link;
  if (!link_type_from_dlt(pcap_datalink(pc), link)) {
    error =
        path + ": unsupported link type " + std::to_string(pcap_datalink(pc)) + " (" +
        (pcap_datalink_val_to_name(pcap_datalink(pc)) ? pcap_datalink_val_to_name(pcap_datalink(pc))
                                                      : "?") +
        "); supported: " + kSupportedLinkTypes;
    pcap_close(pc);
    return SourceStatus::kBadInput;
  }
  if (!set_pcap_filter(pc, opts.filter, error)) {
    pcap_close(pc);
    return SourceStatus::kBadInput;
  }

  // Input that may block (a FIFO, stdin from a pipe): records written meanwhile must not wait in
  // a buffer for the next drain's timer.
  struct stat st {};
  FILE* in = pcap_file(pc);
  out.set_flush_each_drain(in == nullptr || fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode));
  Worker worker(opts.worker);
  // SIGINT/SIGTERM during a replay: stop reading, close every open connection (end_of_capture),
  // write the records, print the summary. Records are written whole on this thread, so a signal
  // never cuts a line.
  StopSignals stop;
  const auto start = std::chrono::steady_clock::now();
  ReadLoop loop{pc, path, link, opts, stop, start};
  unsigned threads = opts.pcap_threads != 0 ? opts.pcap_threads
                     : std::thread::hardware_concurrency() >= 2 && !out.order_sensitive() ? 2
                                                                                          : 1;
  // Two threads need rings that hold several batches' worth of outputs (the tracking thread
  // waits for that much room); smaller rings (tests, fuzzing) replay on one.
  if (opts.worker.ring_capacity < 4 * kPreparedBatch * Worker::kSampleRoomPerPacket) threads = 1;
  const SourceStatus status = threads >= 2 ? replay_two_threads(loop, worker, out, error)
                                           : replay_one_thread(loop, worker, out, error);
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
