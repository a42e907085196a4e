// The exit summary and --prefix-summary, on the control side.
#include <algorithm>
#include <cinttypes>
#include <vector>

#include "capture/collector.hpp"

namespace spand {

void Collector::print_summary(FILE* out, const std::vector<const Worker*>& workers) const {
  const WorkerCounters t = total_counters(workers);
  uint64_t dropped = 0;
  for (uint64_t d : t.drops) dropped += d;
  std::fprintf(out,
               "summary: %" PRIu64 " frames (%" PRIu64 " bytes), %" PRIu64
               " TCP packets tracked, %" PRIu64 " dropped\n",
               t.frames, t.bytes, t.tcp_packets, dropped);
  if (elapsed_s_ > 0) {
    std::fprintf(out, "elapsed: %.3f s, %.3f Mpps\n", elapsed_s_, t.frames / elapsed_s_ / 1e6);
  }
  std::fprintf(out,
               "connections: %" PRIu64 " created, %" PRIu64 " closed (%" PRIu64
               " timed out, %" PRIu64 " evicted from a full table), %" PRIu64
               " still active, %" PRIu64 " resets for unknown connections\n",
               t.flows_created, t.flows_closed + t.flows_evicted, t.flows_timed_out,
               t.flows_evicted, t.active_flows, t.orphan_resets);
  std::fprintf(out,
               "samples: %" PRIu64 " W_c, %" PRIu64 " RTT, %" PRIu64
               " decrease; lost to a full ring: %" PRIu64 " samples, %" PRIu64 " flow records\n",
               t.samples_wc, t.samples_rtt, t.samples_decrease, t.ring_full_samples,
               t.ring_full_flows);
  std::fprintf(out, "outputs: %" PRIu64 " flow records, %" PRIu64 " sample records written\n",
               flows_written_, samples_written_);
  if (output_failed()) {
    std::fprintf(out,
                 "outputs: WRITE FAILED: %" PRIu64 " flow records, %" PRIu64
                 " sample records not written after the error%s%s (the ones buffered before it "
                 "may be lost too)\n",
                 flows_lost_, samples_lost_, flows_failed_ ? " (--flows-out)" : "",
                 samples_failed_ ? " (--samples-out)" : "");
  }
  std::fprintf(
      out,
      "state: %zu B per connection, %zu B more per direction with gaps or resends (%" PRIu64
      " such directions at the peak)\n",
      Worker::bytes_per_flow(), Worker::loss_state_bytes(), t.loss_states_peak);
  if (t.capture_drops || t.capture_interface_down) {
    std::fprintf(out,
                 "capture loss: %" PRIu64
                 " frames dropped before the gateway (kernel or NIC), "
                 "interface down %" PRIu64 " times\n",
                 t.capture_drops, t.capture_interface_down);
  }
  if (t.rtt_below_resolution) {
    std::fprintf(out,
                 "anomaly %-17s %" PRIu64
                 " (RTT samples under the clock's resolution, or ACKs stamped before their "
                 "segment)\n",
                 "rtt_unmeasurable", t.rtt_below_resolution);
  }
  if (t.seq_jumps || t.wc_unsound_seq_jump || t.wc_unsound_pickup || t.wc_unsound_evicted) {
    std::fprintf(out,
                 "anomaly %-17s %" PRIu64 " (W_c not taken: %" PRIu64 " seq_jump, %" PRIu64
                 " pickup, %" PRIu64 " evicted)\n",
                 "seq_jumps", t.seq_jumps, t.wc_unsound_seq_jump, t.wc_unsound_pickup,
                 t.wc_unsound_evicted);
  }
  if (t.loss_states_exhausted) {
    std::fprintf(out, "anomaly %-17s %" PRIu64 "\n", "loss_states_refused",
                 t.loss_states_exhausted);
  }
  if (t.tcp_option_errors) {
    std::fprintf(out, "anomaly %-17s %" PRIu64 "\n", "tcp_option_errors", t.tcp_option_errors);
  }
  for (size_t i = 1; i < t.drops.size(); ++i) {
    if (t.drops[i]) {
      std::fprintf(out, "drop %-20s %" PRIu64 "\n", drop_name(static_cast<Drop>(i)), t.drops[i]);
    }
  }
}

void Collector::print_prefix_summary(FILE* out, const PrefixVerdict& verdict) const {
  std::vector<std::pair<Prefix, Accumulator>> rows(prefixes_.begin(), prefixes_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    const uint64_t na = a.second.wc_count + a.second.rtt_count;
    const uint64_t nb = b.second.wc_count + b.second.rtt_count;
    if (na != nb) return na > nb;
    return a.first.to_string() < b.first.to_string();
  });
  std::fprintf(out, "%-44s %8s %10s %10s %8s %12s %12s %14s %10s %8s %6s %6s %8s %6s %s\n",
               "prefix", "wc_n", "wc_mean", "wc_stddev", "rtt_n", "rtt_mean_ms", "rtt_min_ms",
               "rtt_median_ms", "wc_median", "clients", "reno", "cubic", "scalable", "bbr",
               "verdict");
  static const std::array<uint64_t, kSenderKinds> kNone{};
  for (const auto& [p, a] : rows) {
    const auto it = senders_.find(p);
    const auto& n = it == senders_.end() ? kNone : it->second;
    std::fprintf(
        out,
        "%-44s %8" PRIu64 " %10.2f %10.2f %8" PRIu64 " %12.3f %12.3f %14.3f %10.2f %8u %6" PRIu64
        " %6" PRIu64 " %8" PRIu64 " %6" PRIu64 " %s\n",
        p.to_string().c_str(), a.wc_count, a.wc_mean(), a.wc_stddev(), a.rtt_count,
        a.rtt_mean_us() / 1000.0, a.rtt_count ? a.rtt_min_us / 1000.0 : 0.0,
        a.rtt_median_us() / 1000.0, a.wc_client_median(), a.distinct_wc_clients(),
        n[size_t(SenderKind::kRenoLike)], n[size_t(SenderKind::kCubic)],
        n[size_t(SenderKind::kScalable)], n[size_t(SenderKind::kBbr)], verdict ? verdict(a) : "-");
  }
}

}  // namespace spand
