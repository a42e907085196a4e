// W_c and RTT samples from periodic TCP_INFO snapshots of this host's connections (DESIGN.md
// "Definitions"), for servers with no span port. Pure logic: the sock_diag dump that feeds it
// lives in tcp_info_dump.cpp, so tests drive it with synthetic snapshot sequences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "prefix.hpp"

namespace spand::agent {

// The kernel's "no ssthresh yet" value as tcp_info reports it (TCP_INFINITE_SSTHRESH).
inline constexpr uint32_t kInfiniteSsthresh = 0x7fffffff;

// tcp_ca_state values (linux/tcp.h); only Open and Disorder are congestion avoidance proper.
enum class CaState : uint8_t { kOpen = 0, kDisorder = 1, kCwr = 2, kRecovery = 3, kLoss = 4 };

// Congestion controls whose ssthresh reduction is known, so the cwnd at the loss can be read
// back from the new ssthresh (the snapshot before the loss may be up to an interval old).
enum class CcKind : uint8_t { kOther, kReno, kCubic };

// One socket in one dump: the tcp_info fields the derivation uses.
struct TcpInfoSnapshot {
  uint64_t cookie = 0;  // the kernel's socket cookie: stable for the socket's life
  uint16_t local_port = 0;
  Prefix remote;  // full-length address
  CcKind cc = CcKind::kOther;
  CaState ca_state = CaState::kOpen;
  uint32_t cwnd_segments = 0;              // tcpi_snd_cwnd
  uint32_t ssthresh_segments = 0;          // tcpi_snd_ssthresh
  uint32_t rtt_us = 0;                     // tcpi_rtt (smoothed)
  uint32_t total_retrans = 0;              // tcpi_total_retrans
  uint32_t mss_bytes = 0;                  // tcpi_snd_mss
  uint64_t bytes_acked = 0;                // tcpi_bytes_acked
  uint64_t delivery_rate_bytes_per_s = 0;  // tcpi_delivery_rate (the kernel's rate sample)
  uint32_t min_rtt_us = 0;                 // tcpi_min_rtt
  uint32_t unacked_segments = 0;           // tcpi_unacked: segments in flight
  uint32_t last_data_recv_ms = 0;          // tcpi_last_data_recv: since the peer's last data
};

enum class TcpSampleKind : uint8_t { kRtt, kWcLoss, kWcEnd };

struct TcpSample {
  TcpSampleKind kind = TcpSampleKind::kRtt;
  Prefix remote;
  uint32_t value = 0;  // RTT in microseconds, or W_c in segments
};

struct SamplerCounters {
  uint64_t sockets_sampled_total = 0;  // socket sightings (one per socket per dump)
  uint64_t table_full_total = 0;       // sightings of sockets not tracked: the table was full
  uint64_t samples_total[3] = {};      // by TcpSampleKind
};

class TcpInfoSampler {
 public:
  explicit TcpInfoSampler(size_t max_sockets) : max_sockets_(max_sockets) {}

  // One complete dump of the sampled sockets. Appends the samples it implies to `out`: an RTT
  // sample per socket that is new or acknowledged data since the last dump; a W_c sample for
  // a loss detected in congestion avoidance; a W_c sample for each tracked socket that is
  // gone from this dump without ever retransmitting and whose cwnd grew while watched.
  void on_dump(const std::vector<TcpInfoSnapshot>& sockets, std::vector<TcpSample>& out);

  size_t tracked() const { return table_.size(); }
  const SamplerCounters& counters() const { return counters_; }

 private:
  struct Entry {
    TcpInfoSnapshot last;
    uint32_t first_cwnd_segments = 0;
    uint64_t generation = 0;
  };
  void emit(TcpSampleKind kind, const Prefix& remote, uint32_t value, std::vector<TcpSample>& out);

  size_t max_sockets_;
  uint64_t generation_ = 0;
  std::unordered_map<uint64_t, Entry> table_;
  SamplerCounters counters_;
};

// The cwnd (segments) when a sender in congestion avoidance saw `prev` and then reacted to a
// loss, leaving `cur`: read back from the new ssthresh for Reno and CUBIC, never below the
// last cwnd seen before the loss (cwnd only grows in congestion avoidance).
uint32_t cwnd_at_loss(const TcpInfoSnapshot& prev, const TcpInfoSnapshot& cur);

}  // namespace spand::agent
