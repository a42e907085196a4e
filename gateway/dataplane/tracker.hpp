// TCP reconstruction for one flow at a time: handshake and data-to-ACK RTT samples (Karn),
// timestamp echoes, retransmission vs reordering vs capture copies, loss events classified as
// fast retransmit or timeout (as Tstat), a replica of the sender's congestion control, and W_c
// samples (DESIGN.md, "Definitions"). Per-packet code: no allocation, no syscalls, no locks.
// One file per concern: tracker.cpp (one packet's steps), tracker_handshake.cpp,
// tracker_rtt.cpp, tracker_loss.cpp, tracker_cwnd.cpp, tracker_wc.cpp, tracker_close.cpp.
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

  // First packet of a new flow: decides which side is the client (tracker_handshake.cpp).
  void on_new_flow(Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Every packet of the flow, in capture order (tracker.cpp).
  void on_packet(Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Finalizes the flow: end-of-connection W_c samples and the flow record; returns its
  // LossStates to the pool. Call it once before the flow leaves the table (tracker_close.cpp).
  void close(Flow& f, CloseReason reason);

  // A SYN that starts a new connection on a 4-tuple whose previous connection is over.
  static bool is_new_incarnation(const Flow& f, const ParsedPacket& p, bool src_is_lo);
  // Whole segments, as the kernel counts them (it grows cwnd by one after a window of ACKs).
  static uint32_t cwnd_segments(const HalfFlow& h) { return h.cwnd_q16 >> 16; }

 private:
  // The tracker's code lives in one file per concern (gateway/dataplane/README.md): the steps of
  // one packet in tracker.cpp, and below them, grouped by the file that defines them, the steps
  // it calls. The steps every packet takes are inline in the concern's private header
  // (tracker_rtt.hpp, tracker_loss.hpp, tracker_cwnd.hpp), so builds without LTO inline them as
  // well; small helpers shared by all files are inline in tracker_internal.hpp.
  struct Segment;  // one data segment's place in sequence space (tracker_internal.hpp)

  // tracker.cpp: one packet's walk.
  uint32_t advance_clock(Flow& f, const ParsedPacket& p);
  void rebase(Flow& f, uint64_t now_ns);
  void on_ack(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us);
  void on_data(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id);
  void on_new_data(Flow& f, Dir d, const ParsedPacket& p, const Segment& s, uint32_t now_us);

  // tracker_internal.hpp (inline): the LossState pool, sample headers, RTO and flight.
  // The direction's LossState, taken from the pool at first use; `spill_` if the pool is out
  // (cannot happen while the pool has two states per table slot; counted if it does).
  LossState& loss(HalfFlow& h);
  // The direction's LossState if it has one.
  LossState* loss_if_any(HalfFlow& h);
  // Publishes the pool's use to the worker's counters (when a state is taken or returned).
  void count_loss_states();
  // Payload bytes seen for the first time at the monitor.
  uint64_t unique_bytes(HalfFlow& h);
  Sample base_sample(const Flow& f, SampleKind kind) const;
  uint32_t rto_us(const HalfFlow& h) const;
  static uint32_t flight_segments(const HalfFlow& h);

  // tracker_handshake.cpp: SYN, SYN-ACK and RST; the handshake's RTT legs.
  // False when the SYN is a capture copy (nothing else of the packet counts).
  bool on_syn(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us, bool old_ip_id);
  void on_rst(Flow& f, Dir d, const ParsedPacket& p, uint32_t now_us);
  // The client's ACK of the SYN-ACK: the handshake RTT sample.
  void on_handshake_ack(Flow& f, const ParsedPacket& p, uint32_t now_us);

  // tracker_rtt.hpp (inline) and tracker_rtt.cpp: RTT samples (handshake, data to ACK with
  // Karn, timestamp echoes).
  void time_segment(HalfFlow& h, const ParsedPacket& p, uint32_t end, uint32_t now_us);
  void rtt_on_ack(Flow& f, Dir d, uint32_t ack, uint32_t now_us);
  void on_timestamp_echo(Flow& f, Dir d, uint32_t tsecr, uint32_t now_us);
  // The RTT from a segment sent at sent_us to its ACK at now_us, when the clock did not go back.
  void rtt_between(Flow& f, Dir d, uint32_t sent_us, uint32_t now_us, RttSource src);
  static void karn_on_resend(HalfFlow& h, uint32_t seq);
  void rtt_sample(Flow& f, Dir d, uint32_t rtt_us, RttSource src);

  // tracker_loss.hpp (inline) and tracker_loss.cpp: a segment below the highest sequence sent
  // (capture copy, reordering, retransmission), gaps, SACK and DSACK, and loss events (fast
  // retransmit or timeout, as Tstat).
  // Returns the bytes the receiver reports holding above a hole (SACK blocks above the ACK,
  // a DSACK block not counted; 0: none).
  uint32_t on_sack_blocks(HalfFlow& h, const ParsedPacket& p);
  void forget_acked_gaps(HalfFlow& h, uint32_t ack);
  bool is_capture_copy(HalfFlow& h, const Segment& s, uint16_t sig, bool ipid_ok, bool old_ip_id,
                       uint32_t now_us);
  void note_gap(Flow& f, Dir d, uint32_t seq);
  void on_old_data(Flow& f, Dir d, const Segment& s, uint32_t now_us);
  void classify_resend(Flow& f, Dir d, LossState& l, uint32_t seq, uint32_t end, uint32_t now_us);
  // A loss event: fast retransmit, or timeout after the sender waited `wait_us` since its last
  // transmission.
  void start_loss_event(Flow& f, Dir d, bool timeout, uint32_t wait_us = 0);

  // tracker_cwnd.hpp (inline) and tracker_cwnd.cpp: the replica of the sender's congestion
  // window, rounds, and the measured decrease.
  void cwnd_on_ack(Flow& f, Dir d, uint32_t ack, uint32_t acked, uint32_t sacked_above);
  void restart_after_idle(HalfFlow& h, uint32_t now_us);
  static void bound_cwnd_by_flight(HalfFlow& h, bool below);
  static void cwnd_on_loss(HalfFlow& h, LossState& l, bool timeout);
  // Sender identification's decrease reading of a recovery whose first round a new loss cut
  // short.
  static void read_cut_short_decrease(HalfFlow& h, LossState& l);
  void end_round(Flow& f, Dir d);
  // A new round (one flight) begins at snd_max.
  static void start_round(HalfFlow& h);
  // Sender identification's pacing reading: was this new segment sent on the ACK clock?
  void note_send_clock(HalfFlow& h, uint32_t now_us);

  // tracker_wc.cpp: W_c samples, at a loss in congestion avoidance and at the end.
  void wc_at_loss(Flow& f, Dir d);
  // End-of-connection W_c per direction (0: none) into end_wc.
  void wc_at_close(Flow& f, CloseReason reason, uint16_t end_wc[2]);
  void wc_sample(Flow& f, Dir d, uint32_t wc_seg, WcReason why, bool limited);

  TrackerConfig cfg_;
  Emitter emit_;
  LossPool& pool_;
  LossState spill_;
};

}  // namespace spand
