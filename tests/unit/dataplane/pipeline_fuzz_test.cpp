// Random and mutated frames through the whole per-packet pipeline (parse, flow table, tracker):
// nothing crashes, every frame is either tracked or dropped with a reason, and the counters add
// up. Mutations start from valid frames of real connections so that many of them get deep into
// the tracker with absurd sequence numbers, flags and options.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "dataplane/worker.hpp"
#include "packet_builder.hpp"

namespace spand::test {
namespace {

TEST(PipelineFuzz, RandomAndMutatedFramesAreTrackedOrCountedNeverFatal) {
  WorkerConfig cfg;
  cfg.flow_capacity = 512;  // small: the full-table policy is exercised too
  cfg.ring_capacity = 1 << 12;
  Worker w(cfg);
  std::mt19937_64 rng(20261122);
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 0; i < 64; ++i) {
    TcpSeg s;
    s.src = i % 2 ? "2001:db8::1" : "10.0.0." + std::to_string(1 + i % 200);
    s.dst = i % 2 ? "2001:db8::2" : "192.0.2.1";
    s.sport = uint16_t(1024 + i);
    s.seq = uint32_t(rng());
    s.ack = uint32_t(rng());
    s.flags = uint8_t(rng());
    s.payload_len = uint32_t(rng() % 1500);
    s.mss = 1460;
    s.ts = true;
    s.sack = {{1, 2}};
    if (i % 3 == 0) s.vlans = {100};
    seeds.push_back(build_frame(s, 128));
  }
  uint64_t frames = 0, ts_ns = 1;
  std::vector<uint8_t> buf;
  auto drain = [&w] {
    Sample s;
    while (w.samples().pop(s)) {
    }
    FlowRecord r;
    while (w.flows().pop(r)) {
    }
  };
  for (int i = 0; i < 200'000; ++i) {
    if (i % 2 == 0) {  // random bytes
      buf.resize(rng() % 200);
      for (auto& b : buf) b = uint8_t(rng());
    } else {  // a valid frame with flipped bits, a cut, or a corrupted length field
      buf = seeds[rng() % seeds.size()];
      const int flips = 1 + int(rng() % 4);
      for (int k = 0; k < flips && !buf.empty(); ++k)
        buf[rng() % buf.size()] ^= uint8_t(1u << (rng() % 8));
      if (rng() % 4 == 0) buf.resize(rng() % (buf.size() + 1));
    }
    const uint32_t wire_len = uint32_t(buf.size() + (rng() % 3 == 0 ? rng() % 2000 : 0));
    const LinkType links[] = {LinkType::kEthernet,  LinkType::kRaw,  LinkType::kLinuxSll,
                              LinkType::kLinuxSll2, LinkType::kIpv4, LinkType::kIpv6};
    ts_ns += rng() % 2'000'000;
    w.handle_frame(links[rng() % 6], buf.data(), uint32_t(buf.size()), wire_len, ts_ns);
    ++frames;
    if (i % 256 == 0) drain();
  }
  w.finish();
  drain();
  const WorkerCounters& c = w.counters();
  uint64_t dropped = 0;
  for (uint64_t d : c.drops) dropped += d;
  EXPECT_EQ(c.frames, frames);
  EXPECT_EQ(c.tcp_packets + dropped, frames);  // every frame is accounted for, once
  EXPECT_GT(c.tcp_packets, 10'000u);           // and many reached the tracker
  EXPECT_GT(c.flows_evicted, 0u);
  EXPECT_EQ(c.active_flows, 0u);
  EXPECT_EQ(c.flows_created, c.flows_closed + c.flows_evicted);
}

}  // namespace
}  // namespace spand::test

namespace spand::test {
namespace {

// handle_burst(), stage_frame() and prepare() + handle_prepared() (the two-thread replay) must be
// exact stand-ins for handle_frame() one frame at a time. stage_frame() and prepare() get each
// frame in one reused buffer, overwritten right after the call (as libpcap does), so a pointer
// kept into it would show.
TEST(PipelineBurst, SameRecordsAndCountersAsOneByOne) {
  WorkerConfig cfg;
  cfg.flow_capacity = 256;
  cfg.ring_capacity = 1 << 14;
  Worker one(cfg), burst(cfg), staged(cfg), prepared(cfg);
  std::vector<Worker::Prepared> batch;
  std::vector<uint8_t> reused(2048);
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint32_t> wire;
  for (int i = 0; i < 20'000; ++i) {
    TcpSeg s;
    const int conn = int(rng() % 300);
    const bool from_client = rng() % 2;
    s.src = from_client ? "10.0." + std::to_string(conn % 250) + ".1" : "192.0.2.1";
    s.dst = from_client ? "192.0.2.1" : "10.0." + std::to_string(conn % 250) + ".1";
    s.sport = from_client ? uint16_t(2000 + conn) : 80;
    s.dport = from_client ? 80 : uint16_t(2000 + conn);
    s.seq = uint32_t(rng() % 100000);
    s.ack = uint32_t(rng() % 100000);
    s.flags = rng() % 50 == 0 ? uint8_t(kSyn) : uint8_t(kAck | (rng() % 30 == 0 ? kFin : 0));
    s.payload_len = uint32_t(rng() % 3) * 700;
    frames.push_back(build_frame(s, 128));
    wire.push_back(wire_len_of(s));
    if (rng() % 10 == 0) frames.back().resize(rng() % frames.back().size());  // some truncated
  }
  uint64_t ts = 1'000'000;
  std::vector<Worker::FrameRef> refs;
  for (size_t i = 0; i < frames.size(); ++i) {
    ts += 1000;
    one.handle_frame(LinkType::kEthernet, frames[i].data(), uint32_t(frames[i].size()), wire[i],
                     ts);
    refs.push_back({frames[i].data(), uint32_t(frames[i].size()), wire[i], ts});
    std::copy(frames[i].begin(), frames[i].end(), reused.begin());
    staged.stage_frame(LinkType::kEthernet, reused.data(), uint32_t(frames[i].size()), wire[i], ts);
    batch.emplace_back();
    prepared.prepare(LinkType::kEthernet, reused.data(), uint32_t(frames[i].size()), wire[i], ts,
                     batch.back());
    if (batch.size() == Worker::kBurst || rng() % 5 == 0) {
      prepared.handle_prepared(batch.data(), uint32_t(batch.size()));
      batch.clear();
    }
    std::fill(reused.begin(), reused.end(), uint8_t(0xa5));
    if (rng() % 40 == 0) staged.flush_staged();
    if (refs.size() == Worker::kBurst || rng() % 7 == 0) {  // bursts of every size
      burst.handle_burst(LinkType::kEthernet, refs.data(), uint32_t(refs.size()));
      refs.clear();
    }
  }
  burst.handle_burst(LinkType::kEthernet, refs.data(), uint32_t(refs.size()));
  prepared.handle_prepared(batch.data(), uint32_t(batch.size()));
  prepared.finish();
  one.finish();
  burst.finish();
  staged.finish();  // flushes what is still staged first
  auto records = [](Worker& w) {
    std::vector<std::string> out;
    FlowRecord r;
    while (w.flows().pop(r)) {
      out.push_back(std::to_string(r.client_port) + "/" + std::to_string(int(r.close)) + "/" +
                    std::to_string(r.c2s.bytes) + "/" + std::to_string(r.s2c.bytes) + "/" +
                    std::to_string(r.s2c.rexmt_packets) + "/" + std::to_string(r.c2s.packets) +
                    "/" + std::to_string(r.last_ns));
    }
    return out;
  };
  const auto one_records = records(one);
  EXPECT_EQ(one_records, records(burst));
  EXPECT_EQ(one_records, records(staged));
  EXPECT_EQ(one_records, records(prepared));
  EXPECT_EQ(one.counters().frames, prepared.counters().frames);
  EXPECT_EQ(one.counters().bytes, prepared.counters().bytes);
  EXPECT_EQ(one.counters().tcp_packets, prepared.counters().tcp_packets);
  EXPECT_EQ(one.counters().drops, prepared.counters().drops);
  EXPECT_EQ(one.counters().samples_rtt, prepared.counters().samples_rtt);
  EXPECT_EQ(one.counters().samples_wc, prepared.counters().samples_wc);
  EXPECT_EQ(one.counters().flows_evicted, prepared.counters().flows_evicted);
  EXPECT_EQ(one.counters().tcp_packets, staged.counters().tcp_packets);
  EXPECT_EQ(one.counters().drops, staged.counters().drops);
  EXPECT_EQ(one.counters().samples_rtt, staged.counters().samples_rtt);
  EXPECT_EQ(one.counters().flows_evicted, staged.counters().flows_evicted);
  EXPECT_EQ(one.counters().tcp_packets, burst.counters().tcp_packets);
  EXPECT_EQ(one.counters().drops, burst.counters().drops);
  EXPECT_EQ(one.counters().samples_rtt, burst.counters().samples_rtt);
  EXPECT_EQ(one.counters().flows_evicted, burst.counters().flows_evicted);
  EXPECT_GT(one.counters().flows_evicted, 0u);
}

}  // namespace
}  // namespace spand::test
