#include "policy.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "fakes.hpp"
#include "spand_maps.h"

namespace spand::agent::test {
namespace {

PortConfig port(uint64_t bytes, uint32_t b = 1) {
  PortConfig p;
  p.port = 80;
  p.response_bytes = bytes;
  p.acked_per_ack = b;
  return p;
}

// The paper's rule (Eq. 4, paced at cwnd_opt / mean RTT): what the tests below check.
PolicyConfig paper_rule() {
  PolicyConfig p;
  p.window_rule = WindowRule::kPaper;
  return p;
}

TEST(Policy, WorkedExampleAndPacingAndRto) {
  PolicyConfig pol = paper_rule();
  Decision d = decide(E("198.51.100.0/24", 10, 20), 0, port(1448 * 11), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 5u);
  // 5 segments * 1448 bytes per 20 ms.
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 5u * 1448u * 50u);
  EXPECT_EQ(d.policy.srtt_us, 20000u);
  EXPECT_EQ(d.policy.syn_rto_ms, 200u);  // 3 * 20 ms = 60 ms, floored at 200 ms
}

TEST(Policy, AbsurdWindowIsCapped) {
  PolicyConfig pol = paper_rule();
  pol.max_initial_cwnd = 64;
  Decision d = decide(E("198.51.100.0/24", 1e6), 0, port(10'000'000), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);
  EXPECT_TRUE(d.policy.capped);
  EXPECT_EQ(d.policy.wc_segments, 64u);  // what spand_tune computes from: capped too
  Decision huge = decide(E("198.51.100.0/24", 1e30), 0, port(10'000'000), pol, {});
  ASSERT_EQ(huge.skip, SkipReason::kNone);
  EXPECT_EQ(huge.policy.init_cwnd_segments, 64u);
}

TEST(Policy, SkipReasons) {
  PolicyConfig pol = paper_rule();
  pol.min_samples = 5;
  pol.max_age_s = 300;
  EXPECT_EQ(decide(E("198.51.100.0/24", 10, 20, 4), 0, port(1000), pol, {}).skip,
            SkipReason::kTooFewSamples);
  EXPECT_EQ(decide(E("198.51.100.0/24", 10), 301, port(1000), pol, {}).skip, SkipReason::kStale);
  EXPECT_EQ(decide(E("198.51.100.0/24", NAN), 0, port(1000), pol, {}).skip, SkipReason::kInvalid);
  EXPECT_EQ(decide(E("198.51.100.0/24", 0.2), 0, port(1000), pol, {}).skip, SkipReason::kInvalid);
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 10, 20, 50, Verdict::kUnspecified), 0, port(1000), pol, {}).skip,
      SkipReason::kSlowStart);
  PortConfig off = port(1000);
  off.enabled = false;
  EXPECT_EQ(decide(E("198.51.100.0/24", 10), 0, off, pol, {}).skip, SkipReason::kPortDisabled);
}

TEST(Policy, NoRttMeansNoPacingAndNoRtoSeed) {
  PolicyConfig pol = paper_rule();
  Decision d = decide(E("198.51.100.0/24", 10, 0), 0, port(1448 * 11), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 0u);
  EXPECT_EQ(d.policy.syn_rto_ms, 0u);
}

TEST(Policy, HighBdpCongestionControlOnlyWhenAvailable) {
  PolicyConfig pol = paper_rule();
  pol.high_bdp_cc = "cubic";
  pol.high_bdp_wc_segments = 16;
  EXPECT_EQ(decide(E("198.51.100.0/24", 40), 0, port(100000), pol, {"reno", "cubic"})
                .policy.congestion_control,
            "cubic");
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 40), 0, port(100000), pol, {"reno"}).policy.congestion_control,
      "");
  EXPECT_EQ(
      decide(E("198.51.100.0/24", 15), 0, port(100000), pol, {"cubic"}).policy.congestion_control,
      "");
}

TEST(Policy, SynRtoBounds) {
  EXPECT_EQ(syn_rto_ms_for(100'000), 300u);
  EXPECT_EQ(syn_rto_ms_for(1'000), 200u);
  EXPECT_EQ(syn_rto_ms_for(2'000'000), 1000u);
}

// Rounds by hand: IW10 slow start sends 10, 20, 40, 80 (cumulative 10, 30, 70, 150); with slow
// start skipped a window w sends w, w + 1, ...
TEST(RoundsRule, RoundCounts) {
  EXPECT_EQ(rounds_slow_start(7, 10), 1u);
  EXPECT_EQ(rounds_slow_start(21, 10), 2u);
  EXPECT_EQ(rounds_slow_start(30, 10), 2u);
  EXPECT_EQ(rounds_slow_start(31, 10), 3u);
  EXPECT_EQ(rounds_slow_start(70, 10), 3u);
  EXPECT_EQ(rounds_slow_start(71, 10), 4u);
  EXPECT_EQ(rounds_avoidance(21, 21), 1u);
  EXPECT_EQ(rounds_avoidance(21, 11), 2u);  // 11 + 12
  EXPECT_EQ(rounds_avoidance(21, 10), 2u);  // 10 + 11
  EXPECT_EQ(rounds_avoidance(22, 10), 3u);
  EXPECT_EQ(rounds_avoidance(70, 35), 2u);
  EXPECT_EQ(rounds_avoidance(70, 34), 3u);  // 34 + 35 = 69
}

TEST(RoundsRule, SmallTransfersAndSmallWindowsAreLeftToTheKernel) {
  PolicyConfig pol;
  // 10 KB = 7 segments: IW10 sends it in one round; the paper's rule would pace 7 segments.
  EXPECT_EQ(decide(E("198.51.100.0/24", 30, 50), 0, port(10'000), pol, {}).skip,
            SkipReason::kNoGain);
  // W_c 6 for 21 segments: Eq. 4 gives 1 (cause 5 of the closed-loop issue); IW10 does better.
  EXPECT_EQ(decide(E("198.51.100.0/24", 6, 50), 0, port(21 * 1448), pol, {}).skip,
            SkipReason::kNoGain);
  Estimate wc6 = E("198.51.100.0/24", 6, 50);
  EXPECT_EQ(decide(wc6, 0, port(21 * 1448), paper_rule(), {}).policy.init_cwnd_segments, 1u);
}

TEST(RoundsRule, WindowIsTheTransferUpToTheLargerOfCwndOptAndTheBdp) {
  PolicyConfig pol;
  Estimate est = E("198.51.100.0/24", 25, 60);
  est.min_rtt_ms = 50;
  // 30 KB = 21 segments, W_c 25: the whole transfer in one round, paced at least at
  // 21 segments per propagation RTT (not the mean RTT of 60 ms).
  Decision d = decide(est, 0, port(21 * 1448), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_TRUE(d.policy.skip_slow_start);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 21u * 1448 * 20);  // 21 segments per 50 ms
  // 100 KB = 70 segments with W_c 25: Eq. 4 alone is not enough to beat slow start's 3
  // rounds; a measured 10 Mbit/s over 50 ms (BDP 43 segments) is, paced at that rate.
  PathInfo path{1'250'000, 50'000, 10};
  d = decide(est, 0, port(70 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  // BDP 1.25 MB/s x 50 ms / 1448 B = 43; paced at the rate, the cap is twice it (86), so the
  // window is max_initial_cwnd (64).
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 1'250'000u);
  // Not paced: the cap is the BDP itself.
  PolicyConfig unpaced;
  unpaced.pace = false;
  EXPECT_EQ(decide(est, 0, port(70 * 1448), unpaced, {}, &path).policy.init_cwnd_segments, 43u);
  // Without the path, the window from W_c needs 3 rounds as well: left to the kernel.
  EXPECT_EQ(decide(est, 0, port(70 * 1448), pol, {}).skip, SkipReason::kNoGain);
}

TEST(RoundsRule, PacedAtTheMeasuredRateTheWindowMayBeTwiceTheBdp) {
  // The paper's Scenario 1: 1.6 Mbit/s (200 KB/s), 100 ms, a 10 KB buffer; W_c 12, BDP
  // 200 KB/s x 100 ms / 1448 B = 13. 30 KB = 21 segments: a window of 13 needs two rounds
  // (13 + 14), as slow start from IW10 does; paced at the rate, 21 in one.
  PolicyConfig pol;
  Estimate est = E("198.51.100.0/24", 12, 108);
  est.min_rtt_ms = 100;
  PathInfo path{200'000, 100'000, 10};
  Decision d = decide(est, 0, port(21 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 200'000u);
  // 100 KB (70 segments): 26 + 27 + 28 = 3 rounds, as slow start's 10 + 20 + 40.
  EXPECT_EQ(decide(est, 0, port(70 * 1448), pol, {}, &path).skip, SkipReason::kNoGain);
  // Without a measured rate no such window.
  PathInfo no_rate{0, 100'000, 10};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &no_rate).skip, SkipReason::kNoGain);
}

TEST(RoundsRule, PacedAtTheMeasuredRateWhenThereIsOneElseTheWindowPerRtt) {
  // A capped window loses to slow start on a long transfer (30, 31, ... against 10, 20, 40 ...).
  EXPECT_EQ(rounds_avoidance(691, 30) > rounds_slow_start(691, 10), true);
  PolicyConfig pol;
  pol.max_initial_cwnd = 30;
  Estimate est = E("198.51.100.0/24", 200, 100);
  est.min_rtt_ms = 100;
  PathInfo slow{100'000, 0, 1};  // the path got slower than W_c says (W_c from before)
  // 60 segments: the capped window (30 + 31) takes 2 rounds, slow start 3. Paced at the rate
  // the path delivers now (100 kB/s), not at 30 segments per 100 ms (434 kB/s), which would
  // fill the buffer 3 segments in 4 (the lab's path change: 1.45 x default's time).
  Decision d = decide(est, 0, port(60 * 1448), pol, {}, &slow);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 30u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 100'000u);
  // No rate measured: the window over the propagation RTT.
  PathInfo no_rate{0, 100'000, 1};
  d = decide(est, 0, port(60 * 1448), pol, {}, &no_rate);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 30u * 1448 * 10);
  PathInfo fast{5'000'000, 80'000, 1};  // the host saw a smaller min RTT: it wins
  d = decide(est, 0, port(60 * 1448), pol, {}, &fast);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 5'000'000u);
}

TEST(RoundsRule, RoundsFromAWindowWithSlowStartUpToAThreshold) {
  EXPECT_EQ(rounds_from(21, 21, 21), 1u);
  EXPECT_EQ(rounds_from(70, 35, 35), rounds_avoidance(70, 35));
  EXPECT_EQ(rounds_from(691, 30, 0), rounds_avoidance(691, 30));
  EXPECT_EQ(rounds_from(100, 10, 20), 6u);    // 10, 20, 21, 22, 23 = 96, then 24
  EXPECT_EQ(rounds_from(691, 64, 1553), 4u);  // 64 + 128 + 256 + 512 = 960
  EXPECT_EQ(rounds_from(691, 64, 100), 8u);   // 64, 100, 101 ... 105 = 679, then 106
}

TEST(RoundsRule, ALongTransferSlowStartsFromTheCappedWindowUpToTheBdp) {
  // The paper's Scenario 3: 45 Mbit/s (5.625 MB/s), 400 ms, a 10 KB buffer; 1 MB = 691
  // segments with the window capped at 64. Congestion avoidance from 64 takes 11 rounds
  // (64 + 65 + ... + 73 = 685), slow start from IW10 7 (10 ... 320 = 630): the rounds rule
  // left it to the kernel. Slow start from 64 up to the BDP (5.625 MB/s x 400 ms / 1448 B =
  // 1553 segments) takes 4.
  PolicyConfig pol;
  Estimate est = E("198.51.100.0/24", 12, 400);
  est.min_rtt_ms = 400;
  PathInfo path{5'625'000, 400'000, 10};
  Decision d = decide(est, 0, port(1'000'000), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);
  EXPECT_TRUE(d.policy.skip_slow_start);
  EXPECT_EQ(d.policy.ssthresh_segments, 1553u);
  EXPECT_EQ(d.policy.pacing_cwnd_segments, 0u);  // the transfer is longer than the window
  // Without a rate there is no BDP: the window's own congestion avoidance, which loses.
  PathInfo no_rate{0, 400'000, 10};
  EXPECT_EQ(decide(est, 0, port(1'000'000), pol, {}, &no_rate).skip, SkipReason::kNoGain);
}

TEST(RoundsRule, OnALongPathTheCwndRaisesTheKernelsPacingToTheMeasuredRate) {
  PolicyConfig pol;
  // Scenario 3, 30 KB (21 segments): the kernel would pace 21 segments at 1.2 x 21 x 1448 B /
  // 400 ms = 91 KB/s on a 5.625 MB/s path. The cwnd for 2 x cwnd x 1448 / 0.4 s >= 5.625 MB/s
  // is 777, above the cap: 64, with ssthresh above twice it (the slow-start ratio).
  Estimate est = E("198.51.100.0/24", 21, 400);
  est.min_rtt_ms = 400;
  PathInfo path{5'625'000, 400'000, 10};
  Decision d = decide(est, 0, port(21 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_EQ(d.policy.pacing_cwnd_segments, 64u);
  EXPECT_EQ(d.policy.ssthresh_segments, 1553u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 5'625'000u);
  // The idle path (10 Mbit/s, 50 ms): 1.25 MB/s x 50 ms / (2 x 1448 B) = 21.6 -> 22; ssthresh
  // max(BDP 43, 2 x 22 + 1).
  Estimate idle = E("198.51.100.0/24", 25, 50);
  idle.min_rtt_ms = 50;
  PathInfo idle_path{1'250'000, 50'000, 10};
  d = decide(idle, 0, port(21 * 1448), pol, {}, &idle_path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_EQ(d.policy.pacing_cwnd_segments, 22u);
  EXPECT_EQ(d.policy.ssthresh_segments, 45u);
  // The queueing RTT counts when longer (the handshake's srtt is what the kernel divides by).
  idle.rtt_ms = 100;
  d = decide(idle, 0, port(21 * 1448), pol, {}, &idle_path);
  EXPECT_EQ(d.policy.pacing_cwnd_segments, 44u);  // 1.25 MB/s x 100 ms / 2896 B = 43.2
  // No measured rate: nothing to raise the pacing to.
  d = decide(est, 0, port(21 * 1448), pol, {});
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.pacing_cwnd_segments, 0u);
  EXPECT_EQ(d.policy.ssthresh_segments, 0u);
}

TEST(RoundsRule, ThePathAloneIsEnoughWithoutAUsableEstimate) {
  PolicyConfig pol;
  // Scenario 2's path: 1.6 Mbit/s, 400 ms; IW10 overflows its 10 KB buffer, so the gateway has
  // no W_c sample (SLOW_START). The host measured 200 kB/s and a 400 ms min RTT: BDP 55.
  Estimate none = E("198.51.100.0/24", 0, 0, 0, Verdict::kSlowStart);
  PathInfo path{200'000, 400'000, kMinPathSamples};
  Decision d = decide(none, 0, port(21 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 200'000u);
  // Too few readings, or no rate: the estimate's reason stands.
  PathInfo few{200'000, 400'000, kMinPathSamples - 1};
  EXPECT_EQ(decide(none, 0, port(21 * 1448), pol, {}, &few).skip, SkipReason::kSlowStart);
  PathInfo no_rate{0, 400'000, 10};
  EXPECT_EQ(decide(none, 0, port(21 * 1448), pol, {}, &no_rate).skip, SkipReason::kSlowStart);
  // The paper's rule never decides without an estimate.
  EXPECT_EQ(decide(none, 0, port(21 * 1448), paper_rule(), {}, &path).skip, SkipReason::kSlowStart);
}

TEST(RoundsRule, TheHostsConcurrentSendersShareTheWindow) {
  PolicyConfig pol;
  Estimate est = E("198.51.100.0/24", 25, 60);
  est.min_rtt_ms = 50;
  // The idle path of the lab: 10 Mbit/s, 50 ms. One sender at a time: the whole 30 KB.
  PathInfo alone{1'250'000, 50'000, 10, 1.0};
  Decision d = decide(est, 0, port(70 * 1448), pol, {}, &alone);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);  // twice the BDP (86), within the cap
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 1'250'000u);
  // Two senders on average: half the window and half the rate. 40 segments from 20 take 2
  // rounds (20 + 21), slow start 3 (10 + 20 + 40); 70 segments from 21 would take 4 (21 + 22 +
  // 23 + 24), slow start 3: left to the kernel.
  PathInfo two{1'250'000, 50'000, 10, 2.0};
  d = decide(est, 0, port(40 * 1448), pol, {}, &two);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 20u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 625'000u);
  EXPECT_EQ(decide(est, 0, port(70 * 1448), pol, {}, &two).skip, SkipReason::kNoGain);
  // Eight (the friendliness batches): 43 / 8 = 5 segments, under IW10: left to the kernel
  // (without rule 12's paced floor, below).
  PathInfo eight{1'250'000, 50'000, 10, 8.0};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &eight).skip, SkipReason::kNoGain);
  // Sharing the rate only: each of the eight keeps the 21 segments, paced at 1/8 of the rate;
  // ssthresh at the whole BDP (43), the window being whole.
  pol.share_rate_only = true;
  d = decide(est, 0, port(21 * 1448), pol, {}, &eight);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 21u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 156'250u);
  EXPECT_EQ(d.policy.ssthresh_segments, 43u);
  EXPECT_TRUE(d.policy.share_rate_only);
  pol.share_rate_only = false;
  // Rule 12 (share_floor_paced, on by default): where the buffer is known to have overflowed
  // (a connection retransmitted) and its size read (largest smoothed RTT 100 ms over a 50 ms
  // propagation RTT: 50 ms of buffer), the eight keep the kernel's start (IW10, slow start: no
  // skip, no ssthresh), the first window paced at the whole measured rate, not counted among the
  // first windows in flight; the program paces only a handshake that waited 2 ms in a queue.
  PathInfo eight_full{1'250'000, 50'000, 10, 8.0, 100'000, 1};
  d = decide(est, 0, port(21 * 1448), pol, {}, &eight_full);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 10u);
  EXPECT_FALSE(d.policy.skip_slow_start);
  EXPECT_EQ(d.policy.ssthresh_segments, 0u);
  EXPECT_EQ(d.policy.pacing_rate_bytes_per_s, 1'250'000u);
  EXPECT_FALSE(d.policy.share_concurrent);
  EXPECT_FALSE(d.policy.share_rate_only);
  EXPECT_TRUE(d.policy.share_floor);
  EXPECT_TRUE(d.policy.pace_only_queued);
  EXPECT_TRUE(d.policy.pace_by_rank);  // share_floor_rank, on by default: gated by rank
  // share_floor_burst, on by default: the window the transfer would get alone (21 segments, the
  // whole transfer, not 43 / 8), for the first of a batch to send at once where it fits.
  EXPECT_EQ(d.policy.floor_burst_segments, 21u);
  EXPECT_EQ(decide(est, 0, port(30 * 1448), pol, {}, &eight_full).policy.floor_burst_segments, 30u);
  pol.share_floor_burst = false;
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &eight_full).policy.floor_burst_segments, 0u);
  pol.share_floor_burst = true;
  EXPECT_EQ(d.policy.queue_room_us, 50'000u);
  EXPECT_EQ(d.policy.prop_rtt_us, 50'000u);
  EXPECT_EQ(d.policy.path_rate_bytes_per_s, 1'250'000u);
  EXPECT_EQ(d.policy.congestion_control, "");  // BBR not available: unchanged
  // Sent by share_floor_cc (BBR by default) where the kernel has it; high_bdp_cc is for windows.
  pol.high_bdp_cc = "cubic";
  pol.high_bdp_wc_segments = 1;
  EXPECT_EQ(
      decide(est, 0, port(21 * 1448), pol, {"bbr", "cubic"}, &eight_full).policy.congestion_control,
      "bbr");
  pol.share_floor_cc = "";
  EXPECT_EQ(
      decide(est, 0, port(21 * 1448), pol, {"bbr", "cubic"}, &eight_full).policy.congestion_control,
      "");
  pol.share_floor_cc = "bbr";
  pol.high_bdp_cc = "";
  // share_floor_queued_only = false: every such socket paced (no gate), still rule 12's policy.
  pol.share_floor_queued_only = false;
  d = decide(est, 0, port(21 * 1448), pol, {"bbr"}, &eight_full);
  EXPECT_TRUE(d.policy.share_floor);
  EXPECT_FALSE(d.policy.pace_only_queued);
  EXPECT_FALSE(d.policy.pace_by_rank);  // no gate at all: no rank either
  EXPECT_EQ(d.policy.congestion_control, "bbr");
  pol.share_floor_queued_only = true;
  // share_floor_rank = false: the handshake's queue is the gate, as before.
  pol.share_floor_rank = false;
  d = decide(est, 0, port(21 * 1448), pol, {"bbr"}, &eight_full);
  EXPECT_TRUE(d.policy.pace_only_queued);
  EXPECT_FALSE(d.policy.pace_by_rank);
  EXPECT_EQ(d.policy.floor_burst_segments, 0u);  // the burst is the rank gate's
  pol.share_floor_rank = true;
  // A transfer IW10 sends in one round, no rate, no overflow seen, or one sender: no floor.
  EXPECT_EQ(decide(est, 0, port(10 * 1448), pol, {}, &eight_full).skip, SkipReason::kNoGain);
  PathInfo eight_no_rate{0, 50'000, 10, 8.0, 100'000, 1};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &eight_no_rate).skip, SkipReason::kNoGain);
  PathInfo eight_no_loss{1'250'000, 50'000, 10, 8.0, 100'000, 0};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &eight_no_loss).skip, SkipReason::kNoGain);
  PathInfo one_full{1'250'000, 50'000, 10, 1.0, 100'000, 1};
  EXPECT_FALSE(decide(est, 0, port(21 * 1448), pol, {}, &one_full).policy.share_floor);
  pol.share_floor_paced = false;
  // Sharing off: the senders are not counted.
  pol.share_concurrent = false;
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &eight).policy.init_cwnd_segments, 21u);
}

TEST(RoundsRule, AStandingQueueIsReadAgainstTheLargestQueueingDelaySeen) {
  PolicyConfig pol;
  Estimate est = E("198.51.100.0/24", 25, 60);
  est.min_rtt_ms = 50;
  // 10 Mbit/s, 50 ms, and this host's connections saw a smoothed RTT of 100 ms at most: a
  // buffer of 50 ms. The program gets the room, the propagation RTT and the rate.
  PathInfo path{1'250'000, 50'000, 10, 1.0, 100'000, 1};
  Decision d = decide(est, 0, port(60 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 60u);
  EXPECT_EQ(d.policy.queue_room_us, 50'000u);
  EXPECT_EQ(d.policy.prop_rtt_us, 50'000u);
  EXPECT_EQ(d.policy.path_rate_bytes_per_s, 1'250'000u);
  // 60 segments: slow start from 10 takes 3 rounds (10 + 20 + 40); from 20, the window
  // doubling up to the BDP (43), 2 (20 + 40); from 19 3 (19 + 38 + 43). 20 is the least window
  // that gains.
  EXPECT_EQ(d.policy.min_gain_segments, 20u);
  // 21 segments: only a window of the whole transfer saves a round (10 + 11 from IW10).
  d = decide(est, 0, port(21 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.min_gain_segments, 21u);
  // 70 segments do not fit the window (64): their later segments reveal a loss within a
  // round, so the window is not cut.
  d = decide(est, 0, port(70 * 1448), pol, {}, &path);
  ASSERT_EQ(d.skip, SkipReason::kNone);
  EXPECT_EQ(d.policy.init_cwnd_segments, 64u);
  EXPECT_EQ(d.policy.queue_room_us, 0u);
  // No queueing seen (the largest RTT is the propagation RTT), or the rule off: nothing sent.
  PathInfo flat{1'250'000, 50'000, 10, 1.0, 50'000, 1};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &flat).policy.queue_room_us, 0u);
  // No connection retransmitted: the buffer never overflowed, 50 ms seen is only a lower bound.
  PathInfo no_loss{1'250'000, 50'000, 10, 1.0, 100'000, 0};
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &no_loss).policy.queue_room_us, 0u);
  pol.standing_queue = false;
  EXPECT_EQ(decide(est, 0, port(21 * 1448), pol, {}, &path).policy.queue_room_us, 0u);
}

TEST(QueueWindow, AHandshakeThatWaitedInAStandingQueueGetsWhatTheBufferHasLeft) {
  // The lab's two bottlenecks: 1.19 MB/s read toward the /24, 50 ms propagation, 44 ms of
  // buffer seen, 1448-byte segments, a 30 KB transfer (21 segments, all of it needed to gain).
  const uint32_t prop = 50'000, room = 44'000, mss = 1448;
  const uint64_t rate = 1'190'000;
  auto w = [&](uint32_t iw, uint32_t hs_us, uint32_t min_gain) {
    return spand_queue_window(iw, hs_us, prop, room, rate, mss, min_gain, 10);
  };
  // Under 2 ms or a quarter of the buffer (11 ms) queued: no standing queue, the window stays
  // (the handshake's jitter on an idle path), even where the rest would not hold it.
  EXPECT_EQ(w(21, 50'000, 21), 21u);
  EXPECT_EQ(w(21, 55'000, 21), 21u);
  EXPECT_EQ(w(64, 60'900, 64), 64u);
  // 15 ms queued: 29 ms left hold 1.19 MB/s x 29 ms = 34,510 bytes = 23 segments: 21 fit.
  EXPECT_EQ(w(21, 65'000, 21), 21u);
  // 27.6 ms queued (a lossy transfer of the lab: handshake 77.6 ms): 16.4 ms left hold 19,516
  // bytes = 13 segments: under the 21 that gain, the kernel's.
  EXPECT_EQ(w(21, 77'600, 21), 0u);
  // A window of 64 whose transfer gains from 20 segments: 12 ms queued leave 32 ms = 38,080
  // bytes = 26.3 segments: cut to 26.
  EXPECT_EQ(w(64, 62'000, 20), 26u);
  EXPECT_EQ(w(64, 62'000, 26), 26u);
  EXPECT_EQ(w(64, 62'000, 27), 0u);  // 26 saves no round: the kernel's
  // More queued than the buffer ever held: nothing left.
  EXPECT_EQ(w(64, 120'000, 11), 0u);
  // Missing inputs leave the window alone.
  EXPECT_EQ(spand_queue_window(21, 90'000, 0, room, rate, mss, 21, 10), 21u);
  EXPECT_EQ(spand_queue_window(21, 90'000, prop, 0, rate, mss, 21, 10), 21u);
  EXPECT_EQ(spand_queue_window(21, 90'000, prop, room, 0, mss, 21, 10), 21u);
}

TEST(QueueWindow, RuleTwelvesRankGateLeavesTheWindowsThatFitTheFreeRoom) {
  // The lab's 8 concurrent transfers: 1.19 MB/s, 50 ms propagation, 1448-byte segments, IW10.
  // The buffer in time is capped at the propagation RTT: 50 ms at 1.19 MB/s hold 41.09
  // segments, so with no queue at the handshake four windows of 10 fit and the fifth does not.
  const uint32_t prop = 50'000, mss = 1448;
  const uint64_t rate = 1'190'000;
  auto fits = [&](uint32_t n, uint32_t hs_us, uint32_t room_us) {
    return spand_floor_fits(n, 10, hs_us, prop, room_us, rate, mss);
  };
  EXPECT_TRUE(fits(1, 50'000, 50'000));
  EXPECT_TRUE(fits(4, 50'000, 50'000));
  EXPECT_FALSE(fits(5, 50'000, 50'000));
  // A smoothed RTT stretched by recovery read 131 ms of queueing: still 50 ms of room.
  EXPECT_TRUE(fits(4, 50'000, 131'000));
  EXPECT_FALSE(fits(5, 50'000, 131'000));
  // A smaller buffer seen is taken as it is: 30 ms hold 24.65 segments, two windows.
  EXPECT_TRUE(fits(2, 50'000, 30'000));
  EXPECT_FALSE(fits(3, 50'000, 30'000));
  // The handshake waited 9 ms in the bulk flow's queue: 41 ms left hold 33.7 segments, three.
  EXPECT_TRUE(fits(3, 59'000, 50'000));
  EXPECT_FALSE(fits(4, 59'000, 50'000));
  // A handshake faster than the propagation RTT read (jitter) counts no queue.
  EXPECT_TRUE(fits(4, 49'000, 50'000));
  // As much queued as the room (or more): nothing fits, every window is paced.
  EXPECT_FALSE(fits(1, 100'000, 50'000));
  EXPECT_FALSE(fits(1, 120'000, 50'000));
  // Unknown inputs: nothing fits (the socket is paced, the safe direction on a full buffer).
  EXPECT_FALSE(spand_floor_fits(1, 10, 50'000, prop, 0, rate, mss));
  EXPECT_FALSE(spand_floor_fits(1, 10, 50'000, prop, 50'000, 0, mss));
  EXPECT_FALSE(spand_floor_fits(1, 10, 50'000, prop, 50'000, rate, 0));
  // No overflow at the extremes of the inputs (a 4 s room at 2^40 bytes/s).
  EXPECT_TRUE(spand_floor_fits(1000, 10, 4'000'000, 4'000'000, 4'000'000, 1ull << 40, 1448));
}

TEST(QueueWindow, RuleTwelvesFirstOfABatchSendsItsWholeWindowWhereItFits) {
  // The lab's 8 concurrent transfers again (1.19 MB/s, 50 ms, 1448-byte segments, IW10): with no
  // queue at the handshake 41.09 segments are free. The first sends its 21 segments at once;
  // after it the n-th goes as IW10 while 21 + (n - 1) x 10 fit: the second (31) and third (41),
  // not the fourth (51): paced.
  const uint32_t prop = 50'000, mss = 1448;
  const uint64_t rate = 1'190'000;
  auto window = [&](uint32_t n, uint32_t burst, uint32_t hs_us) {
    return spand_floor_window(n, 10, burst, hs_us, prop, 50'000, rate, mss);
  };
  EXPECT_EQ(window(1, 21, 50'000), 21u);
  EXPECT_EQ(window(2, 21, 50'000), 10u);
  EXPECT_EQ(window(3, 21, 50'000), 10u);
  EXPECT_EQ(window(4, 21, 50'000), 0u);
  // Behind 9 ms of queue 33.7 segments are free: 21, then one IW10 (31); the third (41) paced.
  EXPECT_EQ(window(1, 21, 59'000), 21u);
  EXPECT_EQ(window(2, 21, 59'000), 10u);
  EXPECT_EQ(window(3, 21, 59'000), 0u);
  // A window larger than the free room is not sent at once: the first takes IW10 like the rest,
  // and three of them fit (30 of 33.7).
  EXPECT_EQ(window(1, 40, 59'000), 10u);
  EXPECT_EQ(window(3, 40, 59'000), 10u);
  EXPECT_EQ(window(4, 40, 59'000), 0u);
  // No burst (0) or one under IW10: every rank as the rank gate alone (four fit with no queue).
  EXPECT_EQ(window(1, 0, 50'000), 10u);
  EXPECT_EQ(window(4, 0, 50'000), 10u);
  EXPECT_EQ(window(5, 0, 50'000), 0u);
  EXPECT_EQ(window(1, 6, 50'000), 10u);
  for (uint32_t n = 1; n <= 6; ++n)
    EXPECT_EQ(window(n, 0, 50'000) != 0, spand_floor_fits(n, 10, 50'000, prop, 50'000, rate, mss))
        << n;
  // The program passes the burst only for a handshake that waited 1 ms or more (the lab's idle
  // handshakes read up to 0.9 ms over the propagation RTT).
  EXPECT_FALSE(spand_handshake_waited(50'900, prop));
  EXPECT_TRUE(spand_handshake_waited(51'000, prop));
  EXPECT_FALSE(spand_handshake_waited(51'000, 0));
  // Unknown inputs or no room: paced.
  EXPECT_EQ(spand_floor_window(1, 10, 21, 50'000, prop, 50'000, 0, mss), 0u);
  EXPECT_EQ(spand_floor_window(1, 10, 21, 50'000, prop, 0, rate, mss), 0u);
  EXPECT_EQ(spand_floor_window(1, 10, 21, 110'000, prop, 50'000, rate, mss), 0u);
  EXPECT_EQ(spand_floor_window(0, 10, 21, 50'000, prop, 50'000, rate, mss), 0u);
}

TEST(QueueWindow, ABufferUnderTheKernelsWindowIsTold) {
  // The paper's Scenario 2: 191 KB/s read, 50 ms of buffer seen (10 KB at 1.6 Mbit/s), 1448-byte
  // segments: 9,550 bytes hold 6.6 segments, fewer than IW10's 14,480 bytes.
  EXPECT_TRUE(spand_room_under(50'000, 191'000, 1448, 10));
  // Exactly ten segments' worth is not under: 14,480 bytes at 1.448 MB/s take 10 ms.
  EXPECT_FALSE(spand_room_under(10'000, 1'448'000, 1448, 10));
  EXPECT_TRUE(spand_room_under(9'999, 1'448'000, 1448, 10));
  // The two bottlenecks: 44 ms at 1.19 MB/s hold 36 segments.
  EXPECT_FALSE(spand_room_under(44'000, 1'190'000, 1448, 10));
  // Unknown inputs say nothing.
  EXPECT_FALSE(spand_room_under(0, 191'000, 1448, 10));
  EXPECT_FALSE(spand_room_under(50'000, 0, 1448, 10));
  EXPECT_FALSE(spand_room_under(50'000, 191'000, 0, 10));
  // No overflow at the extremes of the inputs (a 4 s buffer at 2^40 bytes/s).
  EXPECT_FALSE(spand_room_under(4'000'000, 1ull << 40, 1448, 10));
}

TEST(QueueWindow, AStandingQueueIsTwoMsAndAQuarterOfTheBuffer) {
  // Rule 12 paces where the handshake waited 2 ms (its jitter on an idle path stays under it).
  EXPECT_FALSE(spand_handshake_queued(50'000, 50'000));
  EXPECT_FALSE(spand_handshake_queued(51'999, 50'000));
  EXPECT_TRUE(spand_handshake_queued(52'000, 50'000));
  EXPECT_FALSE(spand_handshake_queued(40'000, 50'000));  // under the propagation RTT
  EXPECT_FALSE(spand_handshake_queued(90'000, 0));       // propagation RTT unknown
  // Rule 11's standing queue: also a quarter of the buffer. 50 ms propagation, 44 ms of buffer:
  // a quarter is 11 ms.
  EXPECT_FALSE(spand_standing_queue(60'999, 50'000, 44'000));  // 10.999 ms < 11 ms
  EXPECT_TRUE(spand_standing_queue(61'000, 50'000, 44'000));   // 11 ms x 4 = 44 ms
  // A small buffer (4 ms): a quarter is 1 ms, but under 2 ms is the handshake's jitter.
  EXPECT_FALSE(spand_standing_queue(51'500, 50'000, 4'000));
  EXPECT_TRUE(spand_standing_queue(52'000, 50'000, 4'000));
  EXPECT_FALSE(spand_standing_queue(90'000, 50'000, 0));  // the buffer unknown
  EXPECT_FALSE(spand_standing_queue(90'000, 0, 44'000));
}

TEST(PathRates, AFallOfTheRateIsBelievedAtOnceARiseOnlyByTheMedian) {
  PathRates r(30);
  r.require_trains(true);
  r.hold_trains_s(300);
  const Prefix p = P("198.51.100.0/24");
  r.observe(p, 1'000'000, 50'000, 1);  // a delivery rate of the old path
  for (int t = 1; t <= 5; ++t) r.observe_train(p, 1'250'000, t);
  EXPECT_EQ(r.get(p, 5)->rate_bytes_per_s, 1'250'000u);
  // 60 % of the median: one reading among six, the median stands.
  r.observe_train(p, 750'000, 6);
  EXPECT_EQ(r.get(p, 6)->rate_bytes_per_s, 1'250'000u);
  EXPECT_EQ(r.falls(), 0u);
  // The path fell to 2 Mbit/s: under half the median, the older trains go.
  r.observe_train(p, 250'000, 7);
  EXPECT_EQ(r.get(p, 7)->rate_bytes_per_s, 250'000u);
  EXPECT_EQ(r.falls(), 1u);
  // A rise needs the median: one high train of two (lower median 250,000), then two of three.
  r.observe_train(p, 1'250'000, 8);
  EXPECT_EQ(r.get(p, 8)->rate_bytes_per_s, 250'000u);
  r.observe_train(p, 1'250'000, 9);
  EXPECT_EQ(r.get(p, 9)->rate_bytes_per_s, 1'250'000u);
  // The held trains restarted with the fall too: after the window, the median of 7-9 s.
  r.observe(p, 0, 50'000, 100);
  EXPECT_EQ(r.get(p, 100)->rate_bytes_per_s, 1'250'000u);
}

TEST(PathRates, APacedFlightThatReadItsPacingKeepsTheHeldRate) {
  const Prefix p = P("198.51.100.0/24");
  auto held = [&] {
    PathRates r(30);
    r.require_trains(true);
    r.hold_trains_s(300);
    // Scenario 2's readings: the kernel's own first flights in the first 30 s.
    for (uint64_t rate : {190'000u, 191'000u, 193'000u}) r.observe_train(p, rate, 20);
    return r;
  };
  // Unconfirmed: the hold ends 300 s after the last train.
  PathRates plain = held();
  plain.observe(p, 20'000, 400'000, 310);
  EXPECT_EQ(plain.get(p, 310)->rate_bytes_per_s, 191'000u);
  plain.observe(p, 20'000, 400'000, 330);
  EXPECT_EQ(plain.get(p, 330)->rate_bytes_per_s, 0u);
  // A paced flight read 190,000 B/s (its pacing) at 250 s: held until 550 s.
  PathRates renewed = held();
  renewed.confirm(p, 190'000, 250);
  renewed.observe(p, 20'000, 400'000, 330);
  EXPECT_EQ(renewed.get(p, 330)->rate_bytes_per_s, 191'000u);
  renewed.observe(p, 20'000, 400'000, 549);
  EXPECT_EQ(renewed.get(p, 549)->rate_bytes_per_s, 191'000u);
  renewed.expire(551);
  renewed.observe(p, 20'000, 400'000, 552);
  EXPECT_EQ(renewed.get(p, 552)->rate_bytes_per_s, 0u);
  // The rate at 330 s after one confirmation.
  auto at_330 = [&](uint64_t paced_rate, double when) {
    PathRates r = held();
    r.confirm(p, paced_rate, when);
    r.observe(p, 20'000, 400'000, 330);
    return r.get(p, 330)->rate_bytes_per_s;
  };
  // 90 % of the median renews it (171,900 of 191,000); a flight paced slower, or one that came
  // back at the bottleneck under a median that read high, does not.
  EXPECT_EQ(at_330(171'900, 250), 191'000u);
  EXPECT_EQ(at_330(171'899, 250), 0u);
  // Once the hold has run out, a confirmation does not bring the rate back.
  EXPECT_EQ(at_330(191'000, 321), 0u);
  // A fall of the path's rate drops the confirmation with the held trains.
  PathRates fell = held();
  fell.confirm(p, 191'000, 250);
  fell.observe_train(p, 50'000, 260);
  fell.observe(p, 20'000, 400'000, 400);
  EXPECT_EQ(fell.get(p, 400)->rate_bytes_per_s, 50'000u);  // the new train's, held
  fell.observe(p, 20'000, 400'000, 561);
  EXPECT_EQ(fell.get(p, 561)->rate_bytes_per_s, 0u);  // 301 s after it: the old hold is gone
}

TEST(PathRates, TheLargestSmoothedRttOverTheWindow) {
  PathRates r(60);
  const Prefix p = P("198.51.100.0/24");
  r.observe(p, 1000, 50'000, 1, 90'000, true);
  r.observe(p, 1000, 50'000, 25, 70'000);
  EXPECT_EQ(r.get(p, 30)->max_srtt_us, 90'000u);
  EXPECT_EQ(r.get(p, 30)->retransmitting, 1u);
  EXPECT_EQ(r.get(p, 62)->max_srtt_us, 70'000u);  // the reading at 1 s has left
  EXPECT_EQ(r.get(p, 62)->retransmitting, 0u);
}

TEST(PathRates, SendersAreTheMedianOverTheDumpsThatSawOne) {
  PathRates r(60, 10);  // share window 10 s: two buckets of 5 s
  const Prefix p = P("198.51.100.0/24");
  r.observe(p, 1000, 50'000, 1);
  EXPECT_EQ(r.get(p, 1)->senders, 0.0);  // no dump saw a sender
  r.observe_senders(p, 8, 1);
  r.observe_senders(p, 4, 2);
  r.observe_senders(p, 0, 3);                   // not counted: the prefix was idle
  EXPECT_DOUBLE_EQ(r.get(p, 4)->senders, 4.0);  // {4, 8}: the lower of the two
  r.observe_senders(p, 1, 7);
  EXPECT_DOUBLE_EQ(r.get(p, 8)->senders, 4.0);  // {1, 4, 8}
  // At 11 s the bucket of 0-5 s has left: only the dump at 7 s counts.
  EXPECT_DOUBLE_EQ(r.get(p, 11)->senders, 1.0);
  EXPECT_EQ(r.get(p, 16)->senders, 0.0);
}

TEST(PathRates, AnOccasionalCompetingStartDoesNotMakeEveryTransferShare) {
  // The paper's Scenario 2: transfers one at a time, a competing download now and then starting
  // beside one: 10 dumps saw one starter, 4 saw two (mean 1.29, which would halve nothing but
  // still cut a 21-segment window to 16, one more round than IW10's slow start).
  PathRates r(60, 10);
  const Prefix p = P("198.51.100.0/24");
  r.observe(p, 1000, 50'000, 20);
  for (int i = 0; i < 10; ++i) r.observe_senders(p, 1, 20 + 0.1 * i);
  for (int i = 0; i < 4; ++i) r.observe_senders(p, 2, 21 + 0.1 * i);
  EXPECT_DOUBLE_EQ(r.get(p, 22)->senders, 1.0);
  // Synchronized batches of 8 (the friendliness scenario): dumps during a batch's first round
  // trip see 1 to 8 starters; the median of 2, 5, 8, 8, 6, 3, 1 is 5.
  PathRates b(60, 10);
  b.observe(p, 1000, 50'000, 20);
  for (uint32_t n : {2u, 5u, 8u, 8u, 6u, 3u, 1u}) b.observe_senders(p, n, 20.5);
  EXPECT_DOUBLE_EQ(b.get(p, 21)->senders, 5.0);
  // Counts beyond 64 are counted as 64.
  PathRates c(60, 10);
  c.observe(p, 1000, 50'000, 20);
  c.observe_senders(p, 1000, 20);
  EXPECT_DOUBLE_EQ(c.get(p, 21)->senders, 64.0);
}

TEST(PathRates, WindowedMaxRateAndMinRtt) {
  PathRates r(60);  // six buckets of 10 s
  const Prefix p = P("198.51.100.0/24");
  EXPECT_FALSE(r.get(p, 0).has_value());
  r.observe(p, 1000, 50'000, 1);
  r.observe(p, 3000, 60'000, 2);
  r.observe(p, 2000, 40'000, 25);
  auto i = r.get(p, 30);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->rate_bytes_per_s, 3000u);
  EXPECT_EQ(i->min_rtt_us, 40'000u);
  EXPECT_EQ(i->samples, 3u);
  // At 62 s the readings of 0-10 s have left the window; the one at 25 s stays until 80 s.
  i = r.get(p, 62);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->rate_bytes_per_s, 2000u);
  r.expire(85);
  EXPECT_FALSE(r.get(p, 85).has_value());
  EXPECT_EQ(r.prefixes(), 0u);
}

TEST(PathRates, AckTrainsCountByTheirMedianNotTheirMax) {
  // Scenario 3 of the lab (45 Mbit/s = 5.6 MB/s): most trains read the bottleneck, one whose
  // ACKs came in a clump read 453 MB/s. The max would pace at 80 times the bottleneck.
  PathRates r(60);
  const Prefix p = P("198.51.100.0/24");
  for (uint64_t rate : {5'500'000u, 5'600'000u, 453'000'000u, 5'400'000u, 5'700'000u})
    r.observe_train(p, rate, 1);
  auto i = r.get(p, 2);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->rate_bytes_per_s, 5'600'000u);  // 5.4 5.5 [5.6] 5.7 453
  EXPECT_EQ(i->samples, 5u);
  // A delivery rate above the trains' median still counts (it only reads low).
  r.observe(p, 6'000'000, 400'000, 3);
  EXPECT_EQ(r.get(p, 4)->rate_bytes_per_s, 6'000'000u);
  // Two trains: the lower one.
  PathRates two(60);
  two.observe_train(p, 900, 1);
  two.observe_train(p, 100, 1);
  EXPECT_EQ(two.get(p, 2)->rate_bytes_per_s, 100u);
  // Trains leave the window with their bucket.
  EXPECT_FALSE(two.get(p, 75).has_value());
}

TEST(PathRates, WithTrainsTimedAWindowWithoutOneHasNoRate) {
  // Scenario 3 (5.6 MB/s, 400 ms): a default transfer crawling after a loss delivers 54 KB/s
  // (15 segments per 400 ms); with no train in the window that was the rate spand paced at.
  const Prefix p = P("198.51.100.0/24");
  PathRates r(60);
  r.require_trains(true);
  r.observe(p, 54'000, 400'000, 1);
  auto i = r.get(p, 2);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->rate_bytes_per_s, 0u);  // no rate ...
  EXPECT_EQ(i->min_rtt_us, 400'000u);  // ... but the RTT and the reading count
  EXPECT_EQ(i->samples, 1u);
  r.observe_train(p, 5'600'000, 3);
  EXPECT_EQ(r.get(p, 4)->rate_bytes_per_s, 5'600'000u);
  // Held: with no train in the window, the last trains' median for the hold time.
  PathRates held(30);  // six buckets of 5 s
  held.require_trains(true);
  held.hold_trains_s(300);
  for (uint64_t rate : {5'400'000u, 5'600'000u, 5'700'000u}) held.observe_train(p, rate, 1);
  held.observe(p, 54'000, 400'000, 100);  // a crawling transfer's delivery rate, 99 s later
  EXPECT_EQ(held.get(p, 101)->rate_bytes_per_s, 5'600'000u);
  held.observe_train(p, 2'000'000, 102);  // a newer train in the window wins over the held
  EXPECT_EQ(held.get(p, 103)->rate_bytes_per_s, 2'000'000u);
  // 288 s after the last train: still held, and only the trains of the 30 s before it (the
  // path fell: the old 5.5 MB/s readings are not brought back).
  held.observe(p, 54'000, 400'000, 390);
  EXPECT_EQ(held.get(p, 391)->rate_bytes_per_s, 2'000'000u);
  held.observe(p, 54'000, 400'000, 410);  // 308 s after it: no rate
  EXPECT_EQ(held.get(p, 411)->rate_bytes_per_s, 0u);
  held.expire(411);
  held.observe(p, 54'000, 400'000, 412);
  EXPECT_EQ(held.get(p, 413)->rate_bytes_per_s, 0u);
  // Without trains timed (route mode), the delivery rate is the rate.
  PathRates plain(60);
  plain.observe(p, 54'000, 400'000, 1);
  EXPECT_EQ(plain.get(p, 2)->rate_bytes_per_s, 54'000u);
}

}  // namespace
}  // namespace spand::agent::test
