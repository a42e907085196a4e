#include "dataplane/counters.hpp"

namespace spand {

void WorkerCounters::add(const WorkerCounters& o) {
  frames += o.frames;
  bytes += o.bytes;
  tcp_packets += o.tcp_packets;
  for (size_t i = 0; i < drops.size(); ++i) drops[i] += o.drops[i];
  flows_created += o.flows_created;
  flows_closed += o.flows_closed;
  flows_evicted += o.flows_evicted;
  flows_timed_out += o.flows_timed_out;
  samples_wc += o.samples_wc;
  samples_wc_slow_start += o.samples_wc_slow_start;
  samples_rtt += o.samples_rtt;
  samples_decrease += o.samples_decrease;
  ring_full_samples += o.ring_full_samples;
  ring_full_flows += o.ring_full_flows;
  active_flows += o.active_flows;
  flows_peak += o.flows_peak;
  tcp_option_errors += o.tcp_option_errors;
  orphan_resets += o.orphan_resets;
  loss_states += o.loss_states;
  loss_states_peak += o.loss_states_peak;
  loss_states_exhausted += o.loss_states_exhausted;
  rtt_below_resolution += o.rtt_below_resolution;
  wc_unsound_seq_jump += o.wc_unsound_seq_jump;
  wc_unsound_pickup += o.wc_unsound_pickup;
  wc_unsound_evicted += o.wc_unsound_evicted;
  seq_jumps += o.seq_jumps;
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < 2; ++c) loss_events[d][c] += o.loss_events[d][c];
  capture_drops += o.capture_drops;
  capture_interface_down += o.capture_interface_down;
}

}  // namespace spand
