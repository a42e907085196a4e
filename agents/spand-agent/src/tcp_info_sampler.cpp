#include "tcp_info_sampler.hpp"

#include <algorithm>

namespace spand::agent {

namespace {

// CUBIC's multiplicative decrease, beta = 717/1024 (tcp_cubic.c, BICTCP_BETA_SCALE).
constexpr uint64_t kCubicBeta = 717;
constexpr uint64_t kCubicBetaScale = 1024;

bool in_congestion_avoidance(const TcpInfoSnapshot& s) {
  return (s.ca_state == CaState::kOpen || s.ca_state == CaState::kDisorder) &&
         s.ssthresh_segments < kInfiniteSsthresh && s.cwnd_segments >= s.ssthresh_segments;
}

// A loss the sender reacted to: a retransmission, and a congestion response (ssthresh
// recomputed, cwnd lower than before, or recovery still under way). A retransmission alone may
// be a tail loss probe or a spurious timeout already undone; a response alone may be ECN. The
// new ssthresh alone is not enough: Reno in steady state lands on the same ssthresh each epoch.
bool new_loss(const TcpInfoSnapshot& prev, const TcpInfoSnapshot& cur) {
  if (cur.total_retrans <= prev.total_retrans) return false;
  return cur.ssthresh_segments != prev.ssthresh_segments ||
         cur.cwnd_segments < prev.cwnd_segments || cur.ca_state == CaState::kRecovery ||
         cur.ca_state == CaState::kLoss;
}

}  // namespace

uint32_t cwnd_at_loss(const TcpInfoSnapshot& prev, const TcpInfoSnapshot& cur) {
  uint64_t s = cur.ssthresh_segments;
  uint64_t from_ssthresh = 0;
  // The smallest cwnd the congestion control maps to this ssthresh (s = 2 is also its floor,
  // which says nothing about the cwnd, so it is not inverted).
  if (s > 2 && s < kInfiniteSsthresh) {
    if (cur.cc == CcKind::kReno) from_ssthresh = 2 * s;  // ssthresh = cwnd / 2
    if (cur.cc == CcKind::kCubic)
      from_ssthresh = (s * kCubicBetaScale + kCubicBeta - 1) / kCubicBeta;  // cwnd * 717 / 1024
  }
  return static_cast<uint32_t>(std::max<uint64_t>(prev.cwnd_segments, from_ssthresh));
}

void TcpInfoSampler::emit(TcpSampleKind kind, const Prefix& remote, uint32_t value,
                          std::vector<TcpSample>& out) {
  if (value == 0) return;
  out.push_back({kind, remote, value});
  ++counters_.samples_total[static_cast<size_t>(kind)];
}

void TcpInfoSampler::on_dump(const std::vector<TcpInfoSnapshot>& sockets,
                             std::vector<TcpSample>& out) {
  ++generation_;
  for (const TcpInfoSnapshot& cur : sockets) {
    ++counters_.sockets_sampled_total;
    auto it = table_.find(cur.cookie);
    if (it == table_.end()) {
      if (table_.size() >= max_sockets_) {
        // Untracked sockets give no samples: an RTT per dump from a socket whose history is
        // unknown would weigh idle connections by their age.
        ++counters_.table_full_total;
        continue;
      }
      Entry e;
      e.last = cur;
      e.first_cwnd_segments = cur.cwnd_segments;
      e.generation = generation_;
      table_.emplace(cur.cookie, e);
      emit(TcpSampleKind::kRtt, cur.remote, cur.rtt_us, out);
      continue;
    }
    Entry& e = it->second;
    const TcpInfoSnapshot& prev = e.last;
    // New RTT measurements only come with new ACKs; an idle socket repeats its old srtt.
    if (cur.bytes_acked > prev.bytes_acked) emit(TcpSampleKind::kRtt, cur.remote, cur.rtt_us, out);
    // W_c at a loss in congestion avoidance: the cwnd at that moment minus one segment.
    if (in_congestion_avoidance(prev) && new_loss(prev, cur)) {
      uint32_t cwnd = cwnd_at_loss(prev, cur);
      if (cwnd > 1) emit(TcpSampleKind::kWcLoss, cur.remote, cwnd - 1, out);
    }
    e.last = cur;
    e.generation = generation_;
  }
  // Sockets gone from the dump have ended (or left the sampled states, their data all acked).
  for (auto it = table_.begin(); it != table_.end();) {
    const Entry& e = it->second;
    if (e.generation == generation_) {
      ++it;
      continue;
    }
    // A loss-free end: its cwnd is a W_c sample. Linux grows cwnd only while the flight fills
    // it, so a cwnd that grew while watched is the window the path gave, not an idle
    // connection's initial window (which would echo the agent's own setting back).
    if (e.last.total_retrans == 0 && e.last.cwnd_segments > e.first_cwnd_segments)
      emit(TcpSampleKind::kWcEnd, e.last.remote, e.last.cwnd_segments, out);
    it = table_.erase(it);
  }
}

}  // namespace spand::agent
