// Control side of the gateway: drains workers' rings, writes --flows-out and --samples-out
// (JSON Lines), aggregates samples per client prefix, and prints the exit summary.
#pragma once

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/json_line.hpp"
#include "dataplane/flow_record.hpp"
#include "dataplane/prefix.hpp"
#include "dataplane/sample.hpp"
#include "dataplane/worker.hpp"

namespace spand {

struct OutputOptions {
  std::string flows_path;    // empty = no flow records
  std::string samples_path;  // empty = no sample records
  PrefixConfig prefix;
  // Client ids of the prefix summary's W_c client tables (--client-key-file; the public key
  // without it): the same ids as the Redis writer's.
  SipKey client_key = kPublicClientIdKey;
};

// Serializes one record as a single JSON object line (no trailing newline), appended to `j`.
// Field names are the documented, stable ones (docs/records.md).
void flow_json(JsonLine& j, const FlowRecord& f);
void sample_json(JsonLine& j, const Sample& s, const PrefixConfig& cfg);
// The same as a string (tests, tools).
std::string flow_to_json(const FlowRecord& f);
std::string sample_to_json(const Sample& s, const PrefixConfig& cfg);

class Collector {
 public:
  explicit Collector(const OutputOptions& opts);
  ~Collector();
  // Opens the output files; false with a message when a path cannot be written.
  bool open(std::string& error);

  // Pops everything the worker's rings hold. Called from the control thread only. Records are
  // buffered and reach the outputs in whole lines (every write() ends at a line's end, so a
  // reader following an output never sees a cut line): a regular file when its buffer is full,
  // at the first drain kFlushInterval after the last write, or at flush(); a pipe, a FIFO or a
  // terminal (a reader downstream) at the end of every drain that wrote to it.
  void drain(Worker& w);
  void flush();
  // A source whose input may block (a FIFO or stdin under --pcap) asks for every drain's records
  // to reach the outputs at once: while it waits for input no timer runs.
  void set_flush_each_drain(bool on) { flush_each_drain_ = on; }
  static constexpr std::chrono::milliseconds kFlushInterval{100};
  static constexpr size_t kBufferBytes = 1 << 20;
  void set_elapsed(double seconds) { elapsed_s_ = seconds; }
  // Extra consumer of every sample (the Redis writer hooks in here). Optional.
  void set_sample_hook(std::function<void(const Sample&)> hook) { hook_ = std::move(hook); }
  // Extra consumer of every flow record, --flows-out or not (the Redis writer's loss figures).
  void set_flow_hook(std::function<void(const FlowRecord&)> hook) { flow_hook_ = std::move(hook); }
  // Called after every drain with the newest capture time and every worker drained so far (the
  // control plane's flush and metrics cadence).
  using TickHook = std::function<void(uint64_t capture_now_ns, const std::vector<const Worker*>&)>;
  void set_tick_hook(TickHook hook) { tick_hook_ = std::move(hook); }

  // Whether what is written depends on when drain() is called, not only on the records: a tick
  // hook (the Redis writer flushes by capture time as drains see it), or flow and sample
  // records interleaved on one stream (both '-').
  bool order_sensitive() const {
    return bool(tick_hook_) ||
           (!opts_.flows_path.empty() && opts_.flows_path == opts_.samples_path);
  }

  void print_summary(FILE* out, const std::vector<const Worker*>& workers) const;
  // --prefix-summary. `verdict` names the estimate service's verdict on a prefix's sums (the
  // estimates component's rule, given by spand-gateway); without it the column reads "-".
  using PrefixVerdict = std::function<const char*(const Accumulator&)>;
  void print_prefix_summary(FILE* out, const PrefixVerdict& verdict = {}) const;

  uint64_t flows_written() const { return flows_written_; }
  uint64_t samples_written() const { return samples_written_; }
  // Records that could not be written (a full disk, /dev/full, a closed pipe): after the first
  // write error on an output nothing more is written to it, every later record is counted here,
  // one line goes to stderr, and spand-gateway exits with status 5.
  uint64_t flows_lost() const { return flows_lost_; }
  uint64_t samples_lost() const { return samples_lost_; }
  bool output_failed() const { return flows_failed_ || samples_failed_; }
  const std::unordered_map<Prefix, Accumulator, PrefixHash>& prefixes() const { return prefixes_; }

 private:
  OutputOptions opts_;
  // One output: its stream (for opening, closing and stdout's order with other text) and the
  // buffer of whole lines not yet handed to the kernel.
  struct Sink {
    FILE* file = nullptr;
    std::unique_ptr<char[]> buf;
    size_t used = 0;
    bool regular = true;  // a regular file: buffered up to kBufferBytes or kFlushInterval
  };
  bool flush_each_drain_ = false;
  Sink sinks_[2];
  Sink* flows_out_ = nullptr;    // null: no --flows-out
  Sink* samples_out_ = nullptr;  // the same sink as flows_out_ when both go to '-'
  std::chrono::steady_clock::time_point last_write_{};
  // Hands the buffered lines to the kernel, write() until all are written; false on an error
  // (reported on stderr once, the output marked failed).
  bool write_out(Sink& s, bool& failed, const std::string& path);
  uint64_t flows_written_ = 0;
  uint64_t samples_written_ = 0;
  uint64_t flows_lost_ = 0;
  uint64_t samples_lost_ = 0;
  bool flows_failed_ = false;
  bool samples_failed_ = false;
  // Writes one line; false once the output has failed (reported on stderr once).
  bool write_line(Sink& s, JsonLine& line, bool& failed, const std::string& path);
  JsonLine line_;  // the record being written, reused
  std::unordered_map<Prefix, Accumulator, PrefixHash> prefixes_;
  // Connections per client prefix by the server's identified congestion control (the flow
  // record's s2c `sender`; unknown ones not counted), for --prefix-summary.
  std::unordered_map<Prefix, std::array<uint64_t, kSenderKinds>, PrefixHash> senders_;
  std::function<void(const Sample&)> hook_;
  std::function<void(const FlowRecord&)> flow_hook_;
  double elapsed_s_ = 0;
  TickHook tick_hook_;
  std::vector<const Worker*> seen_workers_;
  uint64_t capture_now_ns_ = 0;
};

}  // namespace spand
