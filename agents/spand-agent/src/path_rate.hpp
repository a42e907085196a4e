// What this host's own connections tell about the path to each client network: the kernel's
// delivery rate (BBR's estimator: data delivered over the ACK interval, per ACK) and its min RTT,
// read from TCP_INFO of every connection the host has. Per key prefix, the largest delivery rate
// and the smallest min RTT over a sliding window: the bottleneck rate and the propagation RTT
// that the first window is paced with (the largest rate, because a rate sample can only read
// low: an application-limited or a shared interval delivers less than the path can).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "prefix.hpp"

namespace spand::agent {

struct PathInfo {
  uint64_t rate_bytes_per_s = 0;  // 0: not measured
  uint32_t min_rtt_us = 0;        // 0: not measured
  uint32_t samples = 0;           // socket readings in the window
  // This host's connections starting a response toward the prefix at once: the median over
  // the dumps of the share window that saw at least one (0 when none did). The median, not the
  // mean: a competing connection that now and then starts beside a transfer does not make every
  // transfer share (the paper's Scenario 2), synchronized batches do (docs/DESIGN.md, rule 6).
  double senders = 0;
  // The largest smoothed RTT read (tcpi_rtt): the propagation RTT plus the most that was queued.
  uint32_t max_srtt_us = 0;
  // Readings of connections that had retransmitted: the buffer overflowed, so the largest
  // queueing delay seen is the buffer's size (rule 11), not a lower bound of it.
  uint32_t retransmitting = 0;
};

// How long a prefix keeps its last trains' median when its window holds none (hold_trains_s).
inline constexpr double kTrainHoldS = 300;

inline constexpr uint64_t kTrainFallFactor = 2;

class PathRates {
 public:
  // `window_s` is split into kBuckets slots; a reading leaves the window after window_s at most.
  explicit PathRates(double window_s = 300, double share_window_s = 10)
      : window_s_(window_s), bucket_s_(window_s / kBuckets), share_bucket_s_(share_window_s / 2) {}

  void observe(const Prefix& key_prefix, uint64_t rate_bytes_per_s, uint32_t min_rtt_us,
               double now_s, uint32_t srtt_us = 0, bool retransmitted = false);
  // One first-flight ACK train's rate. Trains are kept apart and their median is used, not the
  // max: ACKs that arrive in a clump (a receiver or a middlebox holding them, a stalled delay
  // line) make a train read many times the bottleneck, where a delivery rate only reads low.
  // A train that reads under 1 / kTrainFallFactor of the trains' median so far is a fall of
  // the path's rate (a slower path, or one now shared): the older trains and delivery rates
  // are dropped and the median starts again from it, so the first windows after a change of path
  // are not paced at the old path's rate for as long as its trains outnumber the new ones
  // (pathchange.toml: 10 -> 2 Mbit/s, 22 of 25 transfers of the first 30 s retransmitted). A rise
  // is believed only by the median (trains read high from ACKs released in a clump, low only from a
  // slower bottleneck: a train ends at a delayed or late ACK).
  void observe_train(const Prefix& key_prefix, uint64_t rate_bytes_per_s, double now_s);
  uint64_t falls() const { return falls_; }
  // One dump saw `senders` (> 0) of this host's connections starting toward the prefix.
  void observe_senders(const Prefix& key_prefix, uint32_t senders, double now_s);
  std::optional<PathInfo> get(const Prefix& key_prefix, double now_s) const;
  // When ACK trains are timed (BPF mode), a window without a train has no rate: the delivery
  // rate alone reads the bottleneck only once a flight reaches the BDP. On the paper's
  // Scenario 3 (5.6 MB/s, 400 ms) the only readings of some 30 s windows were default transfers
  // crawling in congestion avoidance after a loss, 29-130 KB/s, and 30 KB paced at that took
  // 708 ms where the window over the RTT took 555.
  void require_trains(bool on) { require_trains_ = on; }
  // A prefix whose window holds no train keeps the median of its last trains (those of the
  // window_s before the newest, as the window had them when it was last fed) for `hold_s`
  // (the gateway's 5 minutes): paced first windows that read their own pacing are not
  // recorded (the sock_ops program's train_own_pace), so on a path whose transfers spand
  // paces, trains come only from the kernel's own first flights and from paced ones that read
  // slower than their pacing (a fall of the path's rate is still seen at once). Scenario 3:
  // 3 of 6 transfers per size had no rate in the 30 s window and went to the kernel (1 MB:
  // 10.8-11.2 s against 2.08 s with a rate).
  void hold_trains_s(double hold_s) { hold_s_ = hold_s; }
  // A first flight spand paced at the held rate came back at its pacing (the program's
  // train_own_pace: `paced_rate_bytes_per_s`, a lower bound of the path's rate): the path still
  // delivers the held rate, so the hold runs from now. Only a flight that read 90 % of the held
  // trains' median or more renews it: one paced slower says nothing about the held rate, and a
  // median that read high (ACKs through a token bucket's burst: 216 KB/s on a 1.6 Mbit/s path
  // whose payload rate is at most 191 KB/s) gets flights back at the bottleneck, 88 % of it,
  // and is not kept alive past its hold.
  // Without it, on a path where spand paces every transfer, the held rate ran out hold_s after
  // the kernel's last own first flight however well the paced ones went, and the window went to
  // the window over the propagation RTT: Scenario 2 (1.6 Mbit/s, 400 ms), 21 segments at
  // 76 KB/s instead of 191 KB/s, 0.70 s per transfer instead of 0.55 from 285 s on.
  void confirm(const Prefix& key_prefix, uint64_t paced_rate_bytes_per_s, double now_s);
  // Drops prefixes with no reading in the window.
  void expire(double now_s);
  size_t prefixes() const { return paths_.size(); }

 private:
  static constexpr int kBuckets = 6;
  struct Bucket {
    int64_t index = -1;  // floor(now_s / bucket_s_) when written
    uint64_t rate = 0;
    uint32_t min_rtt_us = 0;
    uint32_t samples = 0;
    uint32_t max_srtt_us = 0;
    uint32_t retransmitting = 0;
    std::vector<uint64_t> trains;  // at most kMaxTrains per bucket (the latest)
  };
  static constexpr size_t kMaxTrains = 32;
  int64_t index_of(double now_s) const { return static_cast<int64_t>(now_s / bucket_s_); }
  // The lower median of the prefix's trains in the window (or of its held ones); 0: none.
  uint64_t trains_median(const Prefix& key_prefix, double now_s) const;
  static constexpr uint32_t kMaxSenders = 64;  // counts above it are counted as 64
  struct SenderBucket {
    int64_t index = -1;                             // floor(now_s / share_bucket_s_) when written
    std::array<uint32_t, kMaxSenders + 1> dumps{};  // dumps[n]: dumps that saw n senders
  };
  double window_s_;
  double bucket_s_;
  double share_bucket_s_;
  bool require_trains_ = false;
  double hold_s_ = 0;
  // Per prefix, (time, rate) of its trains of the window_s before the newest (never empty).
  std::map<Prefix, std::vector<std::pair<double, uint64_t>>> held_;
  // Per prefix, when a paced flight last confirmed the held rate (confirm()).
  std::map<Prefix, double> confirmed_;
  // When the prefix's held trains were last renewed: the newest of them, or a confirmation.
  double held_since(const Prefix& key_prefix, double newest_train_s) const;
  std::map<Prefix, std::array<Bucket, kBuckets>> paths_;
  std::map<Prefix, std::array<SenderBucket, 2>> senders_;
  uint64_t falls_ = 0;
};

}  // namespace spand::agent
