// The TCP_INFO sampler on synthetic snapshot sequences: one scenario per TCP behaviour, expected
// samples reasoned from DESIGN.md "Definitions" and the kernel's ssthresh rules (Reno halves
// the cwnd, CUBIC multiplies it by 717/1024).
#include "tcp_info_sampler.hpp"

#include <gtest/gtest.h>

namespace spand::agent {
namespace {

constexpr uint32_t kInf = kInfiniteSsthresh;

TcpInfoSnapshot snap(uint64_t cookie, uint32_t cwnd, uint32_t ssthresh, uint32_t retrans,
                     uint64_t acked, CaState st = CaState::kOpen, CcKind cc = CcKind::kReno,
                     uint32_t rtt_us = 20000) {
  TcpInfoSnapshot s;
  s.cookie = cookie;
  s.local_port = 8080;
  s.remote = *Prefix::parse("10.77.1.2");
  s.cc = cc;
  s.ca_state = st;
  s.cwnd_segments = cwnd;
  s.ssthresh_segments = ssthresh;
  s.rtt_us = rtt_us;
  s.total_retrans = retrans;
  s.mss_bytes = 1448;
  s.bytes_acked = acked;
  return s;
}

std::vector<TcpSample> step(TcpInfoSampler& s, std::vector<TcpInfoSnapshot> dump) {
  std::vector<TcpSample> out;
  s.on_dump(dump, out);
  return out;
}

std::vector<uint32_t> values(const std::vector<TcpSample>& v, TcpSampleKind k) {
  std::vector<uint32_t> out;
  for (const auto& s : v)
    if (s.kind == k) out.push_back(s.value);
  return out;
}

using V = std::vector<uint32_t>;

TEST(TcpInfoSampler, RenoLossInCongestionAvoidanceReadsCwndFromNewSsthresh) {
  TcpInfoSampler s(16);
  // New socket: its handshake srtt is the first RTT sample.
  auto o = step(s, {snap(1, 10, kInf, 0, 0, CaState::kOpen, CcKind::kReno, 20000)});
  EXPECT_EQ(values(o, TcpSampleKind::kRtt), V{20000});
  // Slow start (ssthresh infinite), new data acked: RTT only.
  o = step(s, {snap(1, 40, kInf, 0, 50000, CaState::kOpen, CcKind::kReno, 21000)});
  EXPECT_EQ(values(o, TcpSampleKind::kRtt), V{21000});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
  // A loss out of slow start is not a W_c sample (the sender was not in congestion avoidance).
  o = step(s, {snap(1, 20, 20, 3, 80000, CaState::kRecovery)});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
  // Back in congestion avoidance, cwnd above ssthresh.
  o = step(s, {snap(1, 24, 20, 3, 200000)});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
  // Loss: Reno's new ssthresh 14 = cwnd / 2, so the cwnd at the loss was 28 (or 29; the smaller
  // is taken); W_c = 28 - 1.
  o = step(s, {snap(1, 15, 14, 5, 260000, CaState::kRecovery)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{27});
  EXPECT_EQ(o.front().remote.addr_str(), "10.77.1.2");
  // The connection ends after losses: no loss-free end sample.
  o = step(s, {});
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(s.tracked(), 0u);
  EXPECT_EQ(s.counters().samples_total[0], 5u);
  EXPECT_EQ(s.counters().samples_total[1], 1u);
  EXPECT_EQ(s.counters().samples_total[2], 0u);
  EXPECT_EQ(s.counters().sockets_sampled_total, 5u);
}

TEST(TcpInfoSampler, CubicLossInvertsBeta) {
  TcpInfoSampler s(16);
  step(s, {snap(1, 30, 20, 1, 1000, CaState::kOpen, CcKind::kCubic)});
  // ssthresh 28 = cwnd * 717 / 1024 (rounded down): cwnd 40 gives 28.007, cwnd 39 gives 27.3.
  auto o = step(s, {snap(1, 28, 28, 2, 2000, CaState::kRecovery, CcKind::kCubic)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{39});
}

TEST(TcpInfoSampler, UnknownCongestionControlUsesLastCwndSeen) {
  TcpInfoSampler s(16);
  step(s, {snap(1, 24, 20, 0, 1000, CaState::kOpen, CcKind::kOther)});
  auto o = step(s, {snap(1, 13, 12, 1, 2000, CaState::kRecovery, CcKind::kOther)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{23});
}

TEST(TcpInfoSampler, NeverBelowTheCwndSeenBeforeTheLoss) {
  TcpInfoSampler s(16);
  // In congestion avoidance cwnd only grows, so a new ssthresh implying 24 < 30 (after an undo
  // or an idle restart) cannot be the cwnd at the loss: the 30 seen before it is.
  step(s, {snap(1, 30, 20, 0, 1000)});
  auto o = step(s, {snap(1, 12, 12, 1, 2000, CaState::kLoss)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{29});
}

TEST(TcpInfoSampler, DisorderIsStillCongestionAvoidance) {
  TcpInfoSampler s(16);
  step(s, {snap(1, 22, 20, 0, 1000, CaState::kDisorder)});
  auto o = step(s, {snap(1, 11, 11, 1, 2000, CaState::kRecovery)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{21});  // max(22, 2 * 11) - 1
}

TEST(TcpInfoSampler, RetransmissionWithoutCongestionResponseIsNoLoss) {
  TcpInfoSampler s(16);
  // A tail loss probe (or an undone spurious timeout) retransmits but the sender kept its
  // ssthresh and cwnd and is in Open: no congestion response, no sample.
  step(s, {snap(1, 24, 20, 0, 1000)});
  auto o = step(s, {snap(1, 25, 20, 1, 2000)});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
}

TEST(TcpInfoSampler, SteadyStateRenoLossWithTheSameSsthresh) {
  TcpInfoSampler s(16);
  // Reno's saw-tooth: each epoch grows from 24 to 48 and halves back to 24, so the new
  // ssthresh equals the old one; the recovery ended between two dumps (state Open again). The
  // lower cwnd and the retransmissions show the loss: cwnd at the loss 2 x 24 = 48, W_c 47.
  step(s, {snap(1, 46, 24, 10, 1000)});
  auto o = step(s, {snap(1, 24, 24, 12, 2000)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{47});
  // Next epoch, caught at the start of its recovery: ssthresh again 24 and cwnd not yet
  // reduced; the state shows the loss. cwnd at the loss: max(47 seen before, 2 x 24) = 48.
  step(s, {snap(1, 47, 24, 12, 3000)});
  o = step(s, {snap(1, 47, 24, 14, 3100, CaState::kRecovery)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcLoss), V{47});
}

TEST(TcpInfoSampler, SsthreshChangeWithoutRetransmissionIsNoLoss) {
  TcpInfoSampler s(16);
  // ECN: ssthresh reduced (CWR) with nothing lost.
  step(s, {snap(1, 24, 20, 0, 1000)});
  auto o = step(s, {snap(1, 12, 12, 0, 2000, CaState::kCwr)});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
}

TEST(TcpInfoSampler, LossesDuringRecoveryBelongToTheSameEpisode) {
  TcpInfoSampler s(16);
  step(s, {snap(1, 24, 20, 0, 1000)});
  EXPECT_EQ(values(step(s, {snap(1, 13, 12, 1, 2000, CaState::kRecovery)}), TcpSampleKind::kWcLoss),
            V{23});
  // Still in recovery, more retransmissions, ssthresh lowered again by a timeout: the state
  // before was not congestion avoidance, so no second sample.
  auto o = step(s, {snap(1, 1, 6, 4, 2500, CaState::kLoss)});
  EXPECT_TRUE(values(o, TcpSampleKind::kWcLoss).empty());
}

TEST(TcpInfoSampler, LossFreeEndGivesFinalCwndOnlyWhenItGrew) {
  TcpInfoSampler s(16);
  step(s, {snap(1, 10, kInf, 0, 0), snap(2, 10, kInf, 0, 0), snap(3, 10, kInf, 0, 0)});
  step(s, {snap(1, 25, kInf, 0, 21720), snap(2, 10, kInf, 0, 1000), snap(3, 30, kInf, 0, 30000)});
  // 1 and 2 end. 1 grew from 10 to 25 in slow start without loss: W_c = 25 (its cwnd at the
  // end). 2 stayed at its initial window (application-limited): no sample.
  auto o = step(s, {snap(3, 31, kInf, 0, 40000)});
  EXPECT_EQ(values(o, TcpSampleKind::kWcEnd), V{25});
  // A socket seen once has no history: no end sample.
  step(s, {snap(3, 31, kInf, 0, 40000), snap(4, 50, kInf, 0, 90000)});
  o = step(s, {});
  EXPECT_EQ(values(o, TcpSampleKind::kWcEnd), V{31});  // 3 grew from 10 to 31; 4 was seen once
}

TEST(TcpInfoSampler, IdleSocketGivesNoRepeatedRtt) {
  TcpInfoSampler s(16);
  EXPECT_EQ(values(step(s, {snap(1, 10, kInf, 0, 500)}), TcpSampleKind::kRtt), V{20000});
  EXPECT_TRUE(step(s, {snap(1, 10, kInf, 0, 500)}).empty());
  EXPECT_EQ(values(step(s, {snap(1, 11, kInf, 0, 501, CaState::kOpen, CcKind::kReno, 30000)}),
                   TcpSampleKind::kRtt),
            V{30000});
}

TEST(TcpInfoSampler, ZeroRttIsNotASample) {
  TcpInfoSampler s(16);
  EXPECT_TRUE(step(s, {snap(1, 10, kInf, 0, 0, CaState::kOpen, CcKind::kReno, 0)}).empty());
}

TEST(TcpInfoSampler, FullTableCountsAndSkips) {
  TcpInfoSampler s(1);
  auto o = step(s, {snap(1, 10, kInf, 0, 0), snap(2, 10, kInf, 0, 0)});
  EXPECT_EQ(o.size(), 1u);  // the RTT of socket 1; socket 2 is not tracked
  EXPECT_EQ(s.counters().table_full_total, 1u);
  EXPECT_EQ(s.tracked(), 1u);
  // Socket 1 ends; the slot goes to socket 2 at the next dump.
  o = step(s, {snap(2, 12, kInf, 0, 100)});
  EXPECT_EQ(s.counters().table_full_total, 2u);
  o = step(s, {snap(2, 12, kInf, 0, 100)});
  EXPECT_EQ(values(o, TcpSampleKind::kRtt), V{20000});
  EXPECT_EQ(s.counters().table_full_total, 2u);
}

}  // namespace
}  // namespace spand::agent
