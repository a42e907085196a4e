// One data-plane worker: the per-lcore pipeline parse -> flow table -> TCP tracker -> samples.
// A worker is owned by exactly one thread; it allocates only in its constructor. Finished flows
// and samples leave through SPSC rings that the control side drains.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/counters.hpp"
#include "dataplane/flow.hpp"
#include "dataplane/flow_record.hpp"
#include "dataplane/loss_pool.hpp"
#include "dataplane/packet.hpp"
#include "dataplane/ring.hpp"
#include "dataplane/sample.hpp"
#include "dataplane/tracker.hpp"

namespace spand {

struct WorkerConfig {
  uint32_t flow_capacity = 1 << 20;      // connections tracked at once (per worker)
  uint32_t syn_timeout_ms = 30'000;      // a handshake that never completes
  uint32_t idle_timeout_s = 300;         // established connection with no packet
  uint32_t closing_timeout_ms = 10'000;  // after FIN/RST
  uint32_t ring_capacity = 1 << 16;      // samples and flow records in flight to the control side
  // Commit the whole flow table at start (a live port: no page fault on the packet path later)
  // rather than as slots are first used (files: a small capture costs little memory).
  bool prefault_table = false;
  // Seed of the flow table's keyed hash (FlowHashSecret): fixed for replays (deterministic
  // output), random per process for live sources (spand-gateway --hash-seed).
  uint64_t hash_seed = kReplayHashSeed;
  // Tunnels opened to reach the TCP inside (DecapFlag bits, parse.hpp; spand-gateway --decap).
  uint8_t decap = 0;
  TrackerConfig tracker;
};

class Worker;
// The sum over workers (control side: plain reads of each worker's counters).
WorkerCounters total_counters(const std::vector<const Worker*>& workers);

class FlowTable;
struct Flow;

class Worker {
 public:
  explicit Worker(const WorkerConfig& cfg);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The per-packet entry point.
  void handle_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                    uint64_t ts_ns);
  // Already-parsed entry point (tests, and sources that parse themselves).
  void handle_packet(const ParsedPacket& p);

  // The pipeline both sources use: the frame is parsed at once (ParsedPacket keeps no pointer
  // into it, so its buffer may be reused after the call, as libpcap and the DPDK scratch copy
  // do) and its table slot prefetched; staged packets are tracked in order at the kBurst-th
  // staged frame or at flush_staged(), so the cache misses of one packet overlap the work on
  // the others. Same results as handle_frame() one by one. Call flush_staged() before reading
  // results or finishing. The first kFlowAhead packets of a flush wait for their flows (nothing
  // was in flight for them before): 128 rather than 32 per flush makes that one start in 128
  // packets, 4-5 % less time per packet on the benchmark mix (docs/results/dataplane_bench.md).
  static constexpr uint32_t kBurst = 128;
  void stage_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                   uint64_t ts_ns);
  void flush_staged();
  // The same pipeline split over two threads (a replay reads and parses on one, tracks on the
  // other): prepare() parses a frame, keys and hashes it, and may run on any thread (it reads
  // only the hash secret); handle_prepared() on the worker's thread counts and tracks prepared
  // frames in order. Same results as stage_frame() over the same frames. A caller that waits for
  // kSampleRoomPerPacket and kRecordRoomPerPacket free ring slots per frame before each batch
  // never loses an output: a packet closes at most three flows (expired or a new incarnation,
  // evicted, swept), each with a record and at most two W_c samples, opens one (one sample) and
  // takes a few RTT, W_c and decrease samples; the bounds are about twice that.
  struct Prepared {
    ParsedPacket pkt;
    FlowKey key;
    uint32_t hash;
    uint32_t wire_len;
    Drop drop;
    bool src_is_lo;
  };
  static constexpr uint32_t kSampleRoomPerPacket = 32;
  static constexpr uint32_t kRecordRoomPerPacket = 8;
  void prepare(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
               uint64_t ts_ns, Prepared& out) const;
  void handle_prepared(const Prepared* frames, uint32_t n);
  // stage_frame() over `n` frames, then flush_staged() (tests, and callers holding a batch).
  struct FrameRef {
    const uint8_t* data;
    uint32_t caplen;
    uint32_t wire_len;
    uint64_t ts_ns;
  };
  void handle_burst(LinkType link, const FrameRef* frames, uint32_t n);
  // Live sources only: moves the worker's clock to the source's time `now_ns` (same clock as the
  // packets' timestamps; never backwards) and visits table slots for timeouts in proportion to
  // the time since the last call, so every slot is seen at least once per kTimeoutSweepNs
  // whatever the traffic: on a quiet link a closed connection's record and W_c sample leave
  // within closing_timeout_ms + 1 s. Replays never call it, so their output stays a function of
  // the packets alone.
  static constexpr uint64_t kTimeoutSweepNs = 1'000'000'000;
  void advance_time(uint64_t now_ns);
  // A live source on this worker's thread reports its capture losses (cumulative) here.
  void set_capture_drops(uint64_t total) { counters_.capture_drops = total; }
  void note_interface_down() { ++counters_.capture_interface_down; }
  // End of input: closes live flows (CloseReason::kEndOfCapture, or kTimeout/kFin/kRst when
  // that already applies), at most `max_flows` per call so the caller can drain the rings in
  // between; returns true while flows remain. finish() closes all at once (small tables, tests).
  bool finish_some(uint32_t max_flows);
  void finish();
  // Flows to close per finish_some() call so that neither ring can overflow: each closed flow
  // emits one record and at most two samples.
  uint32_t finish_batch() const { return uint32_t(cfg_.ring_capacity / 4); }

  SpscRing<Sample>& samples() { return *samples_; }
  SpscRing<FlowRecord>& flows() { return *flows_; }
  const WorkerCounters& counters() const { return counters_; }
  uint64_t now_ns() const { return now_ns_; }  // newest capture time seen
  // State per tracked connection (one Flow), and the whole table's preallocated footprint.
  // Directions that saw a gap, a resend or a loss hold a LossState more (loss_state_bytes()
  // each) while the flow lives.
  // Control side (another thread than the worker's, or the worker's between packets): commits
  // flow and LossState memory ahead of the worker's published peaks (StatePool::commit_ahead), so
  // that a live port's packet path takes no page fault as more connections arrive or go through
  // losses. Returns the LossStates committed.
  uint32_t commit_ahead();
  uint32_t loss_states_committed() const;  // control side
  static size_t bytes_per_flow();
  static size_t loss_state_bytes();
  size_t table_bytes() const;

 private:
  WorkerConfig cfg_;
  FlowHashSecret hash_secret_;
  WorkerCounters counters_;
  std::unique_ptr<SpscRing<Sample>> samples_;
  std::unique_ptr<SpscRing<FlowRecord>> flows_;
  std::unique_ptr<FlowTable> table_;
  std::unique_ptr<LossPool> loss_pool_;
  std::unique_ptr<Tracker> tracker_;
  ParsedPacket scratch_;
  struct Staged {
    ParsedPacket pkt;
    FlowKey key;
    uint32_t hash;
    uint32_t home;  // the table slot where the key's probe starts (FlowTable::home_of)
    bool src_is_lo;
  };
  Staged staged_[kBurst];
  uint32_t staged_count_ = 0;
  uint64_t now_ns_ = 0;    // newest capture time seen: the worker's clock
  uint64_t swept_ns_ = 0;  // source time of the last advance_time() sweep
  void sweep_expired(uint32_t budget);
  // The samples and flow records the tracker wrote since the last call become visible to the
  // control side: at the end of every entry point that tracks packets or closes flows.
  void publish_outputs() {
    samples_->publish();
    flows_->publish();
  }

  void track(const ParsedPacket& p, const FlowKey& key, uint32_t hash, uint32_t home,
             bool src_is_lo);
  bool expired(const Flow& f) const;
  CloseReason expiry_reason(const Flow& f) const;
};

}  // namespace spand
