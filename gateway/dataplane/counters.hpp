// A worker's counters: what the parser, the flow table and the tracker count, in one struct that
// the tracker writes through Emitter and the control side reads (plain monotonic integers, no
// locks). Apart from worker.hpp so that the tracker, which the worker drives, does not include it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "dataplane/packet.hpp"

namespace spand {

// Counters owned by the worker; read by the control side without locks (monotonic integers).
struct WorkerCounters {
  uint64_t frames = 0;
  uint64_t bytes = 0;
  uint64_t tcp_packets = 0;
  std::array<uint64_t, static_cast<size_t>(Drop::kCount)> drops{};
  uint64_t flows_created = 0;
  uint64_t flows_closed = 0;
  uint64_t flows_evicted = 0;  // removed to make room (table full policy)
  uint64_t flows_timed_out = 0;
  uint64_t samples_wc = 0;
  uint64_t samples_wc_slow_start = 0;  // of samples_wc: lower bounds at a first loss in slow start
  uint64_t samples_rtt = 0;
  uint64_t samples_decrease = 0;   // multiplicative decrease readings (one per measured loss)
  uint64_t ring_full_samples = 0;  // samples lost because the control side lagged
  uint64_t ring_full_flows = 0;    // flow records lost for the same reason
  uint64_t active_flows = 0;
  uint64_t flows_peak = 0;         // flows whose memory the table has used: the most held at once
  uint64_t tcp_option_errors = 0;  // segments kept with malformed options skipped
  uint64_t orphan_resets = 0;      // RST for a connection not in the table (not tracked)
  uint64_t loss_states = 0;        // directions holding a LossState now (set by the tracker)
  uint64_t loss_states_peak = 0;   // the most held at once
  uint64_t loss_states_exhausted = 0;  // LossStates refused by a full pool (never expected)
  // RTT samples not emitted: under the clock's resolution, or an ACK stamped before its segment.
  uint64_t rtt_below_resolution = 0;
  // W_c samples not emitted because the flight was not sound (dataplane/README.md, "Sound
  // samples"): a sequence jump beyond the window, a mid-stream pickup whose flights never
  // exceeded 2 segments, a flow evicted from a full table.
  uint64_t wc_unsound_seq_jump = 0;
  uint64_t wc_unsound_pickup = 0;
  uint64_t wc_unsound_evicted = 0;
  uint64_t seq_jumps = 0;  // segments that jumped beyond snd_max + the allowed gap
  // Loss events as the tracker classifies them (the flow records' loss_events_fast and
  // loss_events_timeout, counted when they start): [Dir of the sender][0 fast retransmit,
  // 1 timeout].
  uint64_t loss_events[2][2]{};
  // Set by a live source on this worker's thread: frames the kernel or the NIC dropped before
  // the gateway saw them (libpcap ps_drop + ps_ifdrop, DPDK imissed + rx_nombuf), and the times
  // the interface went away.
  uint64_t capture_drops = 0;
  uint64_t capture_interface_down = 0;

  void add(const WorkerCounters& o);
};

}  // namespace spand
