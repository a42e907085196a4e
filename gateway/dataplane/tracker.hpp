// TCP reconstruction for one flow at a time: handshake and data-to-ACK RTT samples (Karn),
// timestamp echoes, retransmission vs reordering vs capture copies, loss events classified as
// fast retransmit or timeout (as Tstat), a replica of the sender's congestion control, and W_c
// samples (DESIGN.md, "Definitions"). Per-packet code: no allocation, no syscalls, no locks.
#pragma once

#include <cstdint>

#include "dataplane/flow.hpp"
#include "dataplane/flow_record.hpp"
#include "dataplane/loss_pool.hpp"
#include "dataplane/prefix.hpp"
#include "dataplane/ring.hpp"
#include "dataplane/sample.hpp"

namespace spand {

struct WorkerCounters;

struct TrackerConfig {
  uint32_t min_rto_us = 200'000;          // Linux TCP_RTO_MIN; below it a resend is not a timeout
  uint32_t restart_window_segments = 10;  // RFC 5681 restart window (Linux IW) after idle
  uint32_t dup_window_us = 2'000;         // identical-segment copies this close are the capture's
  // The capture clock's resolution: an RTT below it was not measured (a source with one
  // timestamp per receive burst gives 0 for a segment and its ACK in one burst), so it is
  // counted in rtt_below_resolution and not used (so is an ACK stamped before its segment).
  // 0 = per-packet timestamps.
  uint32_t rtt_resolution_us = 0;
  // Networks whose hosts are servers ("inside"); decides roles for connections without a SYN.
  static constexpr int kMaxInside = 16;
  Prefix inside[kMaxInside];
  int inside_count = 0;
};

// Where a tracker's results go: the worker's rings, with losses counted.
struct Emitter {
  SpscRing<Sample>* samples = nullptr;
  SpscRing<FlowRecord>* flows = nullptr;
  WorkerCounters* counters = nullptr;
  void sample(const Sample& s);
  void record(const FlowRecord& r);
};

class Tracker {
 public:
  // `pool` holds the flows' LossStates; close() returns them.
  Tracker(const TrackerConfig& cfg, Emitter emit, LossPool& pool)
      : cfg_(cfg), emit_(emit), pool_(pool) {}

  // First packet of a new flow: decides which side is the client.
  void on_new_flow(Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Every packet of the flow, in capture order.
  void on_packet(Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Finalizes the flow: end-of-connection W_c samples and the flow record; returns its
  // LossStates to the pool. Call it once before the flow leaves the table.
  void close(Flow& f, CloseReason reason);

  // A SYN that starts a new connection on a 4-tuple whose previous connection is over.
  static bool is_new_incarnation(const Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Whole segments, as the kernel counts them (it grows cwnd by one after a window of ACKs).
  static uint32_t cwnd_segments(const HalfFlow& h) { return h.cwnd_q16 >> 16; }

 private:
  void on_data(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id);
  void on_ack(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us);
  void on_timestamp_echo(Flow& f, Dir d, uint32_t tsecr, uint32_t now_us);
  // A loss event: fast retransmit, or timeout after the sender waited `wait_us` since its last
  // transmission.
  void start_loss_event(Flow& f, Dir d, bool timeout, uint32_t wait_us = 0);
  void end_round(Flow& f, Dir d);
  // A new round (one flight) begins at snd_max.
  static void start_round(HalfFlow& h);
  // The RTT from a segment sent at sent_us to its ACK at now_us, when the clock did not go back.
  void rtt_between(Flow& f, Dir d, uint32_t sent_us, uint32_t now_us, RttSource src);
  void rtt_sample(Flow& f, Dir d, uint32_t rtt_us, RttSource src);
  void wc_sample(Flow& f, Dir d, uint32_t wc_seg, WcReason why, bool limited);
  Sample base_sample(const Flow& f, SampleKind kind) const;
  uint32_t rto_us(const HalfFlow& h) const;
  uint32_t flight_segments(const HalfFlow& h) const;
  void rebase(Flow& f, uint64_t now_ns);
  // The direction's LossState, taken from the pool at first use; `spill_` if the pool is out
  // (cannot happen while the pool has two states per table slot; counted if it does).
  LossState& loss(HalfFlow& h);
  // The direction's LossState if it has one.
  LossState* loss_if_any(HalfFlow& h);
  // Publishes the pool's use to the worker's counters (when a state is taken or returned).
  void count_loss_states();
  // Payload bytes seen for the first time at the monitor.
  uint64_t unique_bytes(HalfFlow& h);

  TrackerConfig cfg_;
  Emitter emit_;
  LossPool& pool_;
  LossState spill_;
};

}  // namespace spand
