// libFuzzer target: parse + flow table + TCP tracker (gateway/dataplane/worker.cpp), the whole
// per-packet pipeline on a sequence of frames, in a table of 64 flows so that the full-table
// policy, eviction and timeouts are reached.
// Input: byte 0 chooses the mode (bit 0: a live source, handle_frame() and advance_time() after
// every frame; else a replay; bit 1: every tunnel opened, WorkerConfig::decap); then records of
// [ctl][len][len bytes of frame]: ctl bits 0-2 pick the link type (0-6: fuzz_check.hpp's kLinks; 7:
// Ethernet with the time step taken backwards, as captures with reordered timestamps have them),
// bits 3-7 a time step (0: same time, k: 2^(k+9) ns, 1 us to 18 minutes). Properties: every frame
// is tracked or dropped with a reason, once; every flow is closed or evicted by the end; W_c
// samples are at least one segment; no RTT sample is longer than the input's time span (a timestamp
// going backwards must not wrap); and a replay gives the same counters and samples frame by frame
// (handle_frame) as in bursts (stage_frame, the sources' path).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dataplane/parse.hpp"
#include "dataplane/worker.hpp"
#include "fuzz_check.hpp"

using namespace spand;

namespace {

struct Frame {
  LinkType link;
  uint64_t ts_ns;
  std::vector<uint8_t> bytes;
};

struct Outcome {
  WorkerCounters counters;
  std::vector<Sample> samples;
  uint64_t records = 0;
};

WorkerConfig small_config(bool decap) {
  WorkerConfig cfg;
  if (decap) cfg.decap = kDecapAll;
  cfg.flow_capacity = 64;
  // Drained after every frame; finish() emits at most 64 records and 128 samples.
  cfg.ring_capacity = 256;
  return cfg;
}

void drain(Worker& w, Outcome& out) {
  Sample s;
  while (w.samples().pop(s)) out.samples.push_back(s);
  FlowRecord r;
  while (w.flows().pop(r)) ++out.records;
}

void check_accounting(const Outcome& o, size_t frames, uint64_t span_ns) {
  const WorkerCounters& c = o.counters;
  uint64_t dropped = 0;
  for (uint64_t d : c.drops) dropped += d;
  FUZZ_CHECK(c.frames == frames);
  FUZZ_CHECK(c.tcp_packets + dropped == frames);
  FUZZ_CHECK(c.active_flows == 0);
  FUZZ_CHECK(c.flows_created == c.flows_closed + c.flows_evicted);
  FUZZ_CHECK(o.records + c.ring_full_flows == c.flows_created);
  for (const Sample& s : o.samples) {
    if (s.kind == SampleKind::kWc) FUZZ_CHECK(s.value >= 1);
    if (s.kind == SampleKind::kRtt) FUZZ_CHECK(uint64_t(s.value) * 1000 <= span_ns);
  }
}

bool same_sample(const Sample& a, const Sample& b) {
  return a.ts_ns == b.ts_ns && a.client == b.client && a.server == b.server &&
         a.client_port == b.client_port && a.server_port == b.server_port && a.kind == b.kind &&
         a.wc_reason == b.wc_reason && a.rtt_source == b.rtt_source &&
         a.cwnd_limited == b.cwnd_limited && a.sender == b.sender && a.value == b.value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool live = data[0] & 1;
  const bool decap = data[0] & 2;
  std::vector<Frame> frames;
  uint64_t ts_ns = 1'700'000'000'000'000'000ull, min_ns = ts_ns, max_ns = ts_ns;
  for (size_t i = 1; i + 2 <= size;) {
    const uint8_t ctl = data[i];
    const size_t len = std::min<size_t>(data[i + 1], size - i - 2);
    const uint32_t step = ctl >> 3;
    const uint64_t step_ns = step ? uint64_t(1) << (step + 9) : 0;
    ts_ns = (ctl & 7) == 7 ? ts_ns - step_ns : ts_ns + step_ns;
    min_ns = std::min(min_ns, ts_ns);
    max_ns = std::max(max_ns, ts_ns);
    const LinkType link = (ctl & 7) == 7 ? LinkType::kEthernet : fuzz::kLinks[ctl & 7];
    frames.push_back({link, ts_ns, std::vector<uint8_t>(data + i + 2, data + i + 2 + len)});
    i += 2 + len;
  }
  const uint64_t span_ns = max_ns - min_ns;

  Outcome one;
  {
    Worker w(small_config(decap));
    for (const Frame& f : frames) {
      w.handle_frame(f.link, f.bytes.data(), uint32_t(f.bytes.size()), uint32_t(f.bytes.size()),
                     f.ts_ns);
      if (live) w.advance_time(f.ts_ns);
      drain(w, one);
    }
    w.finish();
    drain(w, one);
    one.counters = w.counters();
  }
  check_accounting(one, frames.size(), span_ns);
  if (live) return 0;

  Outcome burst;
  {
    Worker w(small_config(decap));
    for (const Frame& f : frames) {
      w.stage_frame(f.link, f.bytes.data(), uint32_t(f.bytes.size()), uint32_t(f.bytes.size()),
                    f.ts_ns);
      drain(w, burst);
    }
    w.flush_staged();
    w.finish();
    drain(w, burst);
    burst.counters = w.counters();
  }
  check_accounting(burst, frames.size(), span_ns);
  FUZZ_CHECK(one.counters.tcp_packets == burst.counters.tcp_packets);
  FUZZ_CHECK(one.counters.flows_created == burst.counters.flows_created);
  FUZZ_CHECK(one.counters.flows_evicted == burst.counters.flows_evicted);
  FUZZ_CHECK(one.counters.samples_wc == burst.counters.samples_wc);
  FUZZ_CHECK(one.counters.samples_rtt == burst.counters.samples_rtt);
  FUZZ_CHECK(one.samples.size() == burst.samples.size());
  for (size_t i = 0; i < one.samples.size(); ++i)
    FUZZ_CHECK(same_sample(one.samples[i], burst.samples[i]));
  return 0;
}
