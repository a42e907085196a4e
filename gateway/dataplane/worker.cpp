#include "dataplane/worker.hpp"

#include <algorithm>

#include "dataplane/flow_table.hpp"
#include "dataplane/parse.hpp"
#include "dataplane/tracker.hpp"

namespace spand {

namespace {
// Slots examined for timeouts per packet: a table of N slots is swept every N packets. Each
// occupied slot costs a cache miss, so this stays small.
constexpr uint32_t kSweepBudget = 1;
// Flows prefetched ahead of the packet tracked: 8 measured best (4: +3 %, 16: +3 %, 32: +9 %).
constexpr uint32_t kFlowAhead = 8;
}  // namespace

WorkerCounters total_counters(const std::vector<const Worker*>& workers) {
  WorkerCounters t;
  for (const Worker* w : workers) t.add(w->counters());
  return t;
}

Worker::Worker(const WorkerConfig& cfg)
    : cfg_(cfg),
      hash_secret_(FlowHashSecret::from_seed(cfg.hash_seed)),
      samples_(new SpscRing<Sample>(cfg.ring_capacity, cfg.prefault_table)),
      flows_(new SpscRing<FlowRecord>(cfg.ring_capacity, cfg.prefault_table)),
      // A live port commits flows for one connection of capacity in eight at start, and keeps
      // that margin ahead of the most ever held (commit_ahead()); a replay commits as it goes.
      table_(new FlowTable(cfg.flow_capacity,
                           cfg.prefault_table ? std::max(cfg.flow_capacity / 8, 1u) : 0)),
      // Two per slot: never short while the table holds the flows. A live port commits states
      // for one connection in eight at start (LossPool: only the peak in use is ever committed).
      loss_pool_(new LossPool(2 * table_->slots(), cfg.prefault_table ? table_->slots() / 8 : 0)),
      tracker_(new Tracker(cfg.tracker, Emitter{samples_.get(), flows_.get(), &counters_},
                           *loss_pool_)) {}

Worker::~Worker() = default;

uint32_t Worker::commit_ahead() {
  // Plain reads of counters the worker publishes (as total_counters()): a stale value only
  // delays the commit to the next call.
  table_->commit_ahead(uint32_t(counters_.flows_peak));
  return loss_pool_->commit_ahead(uint32_t(counters_.loss_states_peak));
}

uint32_t Worker::loss_states_committed() const {
  return loss_pool_->committed();
}

size_t Worker::bytes_per_flow() {
  return sizeof(Flow);
}
size_t Worker::loss_state_bytes() {
  return sizeof(LossState);
}
size_t Worker::table_bytes() const {
  return table_->memory_bytes();
}

void Worker::handle_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                          uint64_t ts_ns) {
  ++counters_.frames;
  counters_.bytes += wire_len;
  const Drop d = parse_frame(link, data, caplen, wire_len, ts_ns, scratch_, cfg_.decap);
  if (d != Drop::kNone) {
    ++counters_.drops[static_cast<size_t>(d)];
    return;
  }
  handle_packet(scratch_);
}

CloseReason Worker::expiry_reason(const Flow& f) const {
  if (f.close_kind == uint8_t(CloseReason::kRst)) return CloseReason::kRst;
  if (f.close_kind == uint8_t(CloseReason::kFin)) return CloseReason::kFin;
  return CloseReason::kTimeout;
}

bool Worker::expired(const Flow& f) const {
  if (now_ns_ <= f.last_ns) return false;
  const uint64_t idle_ns = now_ns_ - f.last_ns;
  switch (f.phase) {
    case FlowPhase::kSynOnly:
      return idle_ns > uint64_t(cfg_.syn_timeout_ms) * 1'000'000;
    case FlowPhase::kEstablished:
      return idle_ns > uint64_t(cfg_.idle_timeout_s) * 1'000'000'000;
    case FlowPhase::kClosing:
      return idle_ns > uint64_t(cfg_.closing_timeout_ms) * 1'000'000;
  }
  return false;
}

void Worker::handle_packet(const ParsedPacket& p) {
  if (staged_count_ != 0) flush_staged();
  bool src_is_lo = false;
  const FlowKey key = make_key(p, src_is_lo);
  const uint32_t hash = hash_key(key, hash_secret_);
  track(p, key, hash, table_->home_of(hash), src_is_lo);
  publish_outputs();
}

void Worker::stage_frame(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                         uint64_t ts_ns) {
  Staged& st = staged_[staged_count_];
  ++counters_.frames;
  counters_.bytes += wire_len;
  const Drop d = parse_frame(link, data, caplen, wire_len, ts_ns, st.pkt, cfg_.decap);
  if (d != Drop::kNone) {
    ++counters_.drops[static_cast<size_t>(d)];
    return;
  }
  st.key = make_parsed_key(st.pkt, hash_secret_, st.src_is_lo, st.hash);
  st.home = table_->home_of(st.hash);
  table_->prefetch_slot(st.home);
  if (++staged_count_ == kBurst) flush_staged();
}

void Worker::flush_staged() {
  // The staged packets' slots were prefetched as they were staged: now the flows they point to,
  // kFlowAhead packets ahead of the one tracked.
  const uint32_t n = staged_count_;
  auto prefetch_flow = [&](const Staged& st) { table_->prefetch_flow(st.hash, st.home); };
  for (uint32_t i = 0; i < n && i < kFlowAhead; ++i) prefetch_flow(staged_[i]);
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kFlowAhead < n) prefetch_flow(staged_[i + kFlowAhead]);
    const Staged& st = staged_[i];
    track(st.pkt, st.key, st.hash, st.home, st.src_is_lo);
  }
  staged_count_ = 0;
  publish_outputs();
}

void Worker::prepare(LinkType link, const uint8_t* data, uint32_t caplen, uint32_t wire_len,
                     uint64_t ts_ns, Prepared& out) const {
  out.wire_len = wire_len;
  out.drop = parse_frame(link, data, caplen, wire_len, ts_ns, out.pkt, cfg_.decap);
  if (out.drop != Drop::kNone) return;
  out.key = make_parsed_key(out.pkt, hash_secret_, out.src_is_lo, out.hash);
}

void Worker::handle_prepared(const Prepared* frames, uint32_t n) {
  flush_staged();
  for (uint32_t i = 0; i < n; ++i) {
    const Prepared& p = frames[i];
    ++counters_.frames;
    counters_.bytes += p.wire_len;
    if (p.drop != Drop::kNone) {
      ++counters_.drops[static_cast<size_t>(p.drop)];
    } else {
      table_->prefetch(p.hash);
    }
  }
  auto prefetch_flow = [&](uint32_t i) {
    if (frames[i].drop == Drop::kNone) table_->prefetch_flow(frames[i].hash);
  };
  for (uint32_t i = 0; i < n && i < kFlowAhead; ++i) prefetch_flow(i);
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kFlowAhead < n) prefetch_flow(i + kFlowAhead);
    const Prepared& p = frames[i];
    if (p.drop == Drop::kNone) track(p.pkt, p.key, p.hash, table_->home_of(p.hash), p.src_is_lo);
  }
  publish_outputs();
}

void Worker::handle_burst(LinkType link, const FrameRef* frames, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const FrameRef& fr = frames[i];
    stage_frame(link, fr.data, fr.caplen, fr.wire_len, fr.ts_ns);
  }
  flush_staged();
}

void Worker::track(const ParsedPacket& p, const FlowKey& key, uint32_t hash, uint32_t home,
                   bool src_is_lo) {
  ++counters_.tcp_packets;
  if (p.opt.malformed) ++counters_.tcp_option_errors;
  if (p.ts_ns > now_ns_) now_ns_ = p.ts_ns;
  Flow* f = table_->find(key, hash, home);
  // A half-open flow past its SYN timeout that the sweep has not reached yet ends when a SYN-ACK
  // comes: a SYN-ACK 31 minutes after the SYN is not the same handshake (it made a 35.8-minute
  // RTT sample). Other packets keep the sweep's pace (a SYN resent after a 64 s backoff stays
  // one connection attempt, as capture manifests count them).
  if (f && f->phase == FlowPhase::kSynOnly && (p.flags & (kSyn | kAck)) == (kSyn | kAck) &&
      expired(*f)) {
    const CloseReason r = expiry_reason(*f);
    tracker_->close(*f, r);
    if (r == CloseReason::kTimeout) ++counters_.flows_timed_out;
    ++counters_.flows_closed;
    table_->erase(f, hash);
    f = nullptr;
  }
  if (f && Tracker::is_new_incarnation(*f, p, src_is_lo)) {
    tracker_->close(*f, expiry_reason(*f));
    table_->erase(f, hash);
    ++counters_.flows_closed;
    f = nullptr;
  }
  if (!f) {
    if (p.flags & kRst) {  // a reset for a connection we do not know: nothing to track
      ++counters_.orphan_resets;
      return;
    }
    f = table_->insert(
        key, hash,
        [this](Flow& victim) {
          tracker_->close(victim, CloseReason::kEvicted);
          ++counters_.flows_evicted;
        },
        (p.flags & kSyn) != 0);
    if (!f) {  // full of verified flows: a non-SYN newcomer (lone ACK) is not tracked
      ++counters_.drops[static_cast<size_t>(Drop::kFlowTableFull)];
      return;
    }
    ++counters_.flows_created;
    counters_.flows_peak = table_->flows_peak();
    tracker_->on_new_flow(*f, p, src_is_lo);
  }
  tracker_->on_packet(*f, p, src_is_lo);

  sweep_expired(kSweepBudget);
  counters_.active_flows = table_->size();
}

void Worker::sweep_expired(uint32_t budget) {
  table_->sweep(budget, [this](Flow& v) {
    if (!expired(v)) return false;
    const CloseReason r = expiry_reason(v);
    tracker_->close(v, r);
    if (r == CloseReason::kTimeout) ++counters_.flows_timed_out;
    ++counters_.flows_closed;
    return true;
  });
}

void Worker::advance_time(uint64_t now_ns) {
  flush_staged();
  if (now_ns > now_ns_) now_ns_ = now_ns;
  if (swept_ns_ == 0 || now_ns_ < swept_ns_) {
    swept_ns_ = now_ns_;
    return;
  }
  // Slots due for the time elapsed; the remainder carries over (swept_ns_ moves only by the
  // time the visited slots account for).
  const uint64_t slots = table_->slots();
  const uint64_t elapsed_ns = now_ns_ - swept_ns_;
  if (elapsed_ns >= kTimeoutSweepNs) {  // a whole sweep due: the table once
    swept_ns_ = now_ns_;
    sweep_expired(uint32_t(slots));
  } else {
    const uint64_t due = slots * elapsed_ns / kTimeoutSweepNs;
    if (due == 0) return;
    swept_ns_ += due * kTimeoutSweepNs / slots;
    sweep_expired(uint32_t(due));
  }
  counters_.active_flows = table_->size();
  publish_outputs();
}

bool Worker::finish_some(uint32_t max_flows) {
  flush_staged();
  const uint32_t left = table_->erase_some(max_flows, [this](Flow& v) {
    CloseReason r = expiry_reason(v);
    if (r == CloseReason::kTimeout && !expired(v)) r = CloseReason::kEndOfCapture;
    tracker_->close(v, r);
    if (r == CloseReason::kTimeout) ++counters_.flows_timed_out;
    ++counters_.flows_closed;
  });
  counters_.active_flows = left;
  publish_outputs();
  return left > 0;
}

void Worker::finish() {
  while (finish_some(UINT32_MAX)) {
  }
}

}  // namespace spand
