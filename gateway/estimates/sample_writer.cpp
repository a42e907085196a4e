#include "estimates/sample_writer.hpp"

#include <charconv>
#include <cstdio>
#include <fstream>

#include "estimates/redis_schema.hpp"

namespace spand {

uint64_t system_wall_now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

SampleReject check_sample(const Sample& s, const SampleWriterOptions& opts, uint64_t wall_now_ns) {
  if (s.ts_ns > wall_now_ns &&
      s.ts_ns - wall_now_ns > uint64_t(opts.clock_skew_s) * 1'000'000'000ULL)
    return SampleReject::kFuture;
  if (s.kind == SampleKind::kWc && s.value > opts.max_wc_segments) return SampleReject::kWcBound;
  if (s.kind == SampleKind::kRtt && s.value > opts.max_rtt_us) return SampleReject::kRttBound;
  return SampleReject::kNone;
}

const char* sample_reject_name(SampleReject r) {
  switch (r) {
    case SampleReject::kNone:
      return "none";
    case SampleReject::kFuture:
      return "future";
    case SampleReject::kWcBound:
      return "wc_bound";
    case SampleReject::kRttBound:
      return "rtt_bound";
  }
  return "?";
}

SampleWriterOptions writer_options_from(const EstimatesOptions& opts) {
  SampleWriterOptions w;
  w.flush_interval_ms = opts.flush_interval_ms;
  w.bucket_s = opts.bucket_s ? opts.bucket_s : 10;
  w.backlog_max_updates = opts.backlog_max_updates;
  w.prefix = opts.prefix;
  w.clock_skew_s = opts.clock_skew_s;
  return w;
}

std::string client_key_fingerprint_hex(const SipKey& key) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(client_key_fingerprint(key)));
  return buf;
}

bool read_client_key_file(const std::string& path, SipKey& key, std::string& error) {
  if (path == kPublicKeyWord) {
    key = kPublicClientIdKey;
    return true;
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    error = "--client-key-file " + path + ": cannot read it";
    return false;
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  uint8_t bytes[16];
  bool ok = line.size() == 32;
  for (size_t i = 0; ok && i < 16; ++i) {
    const auto r = std::from_chars(line.data() + 2 * i, line.data() + 2 * i + 2, bytes[i], 16);
    ok = r.ec == std::errc() && r.ptr == line.data() + 2 * i + 2;
  }
  if (!ok) {
    error = "--client-key-file " + path +
            ": the first line must be 32 hex digits (make one with "
            "'od -An -tx1 -N16 /dev/urandom | tr -d \" \\n\"')";
    return false;
  }
  key = SipKey{};
  for (int i = 7; i >= 0; --i) {
    key.k0 = (key.k0 << 8) | bytes[i];
    key.k1 = (key.k1 << 8) | bytes[8 + i];
  }
  return true;
}

SampleWriter::SampleWriter(UpdateSink& sink, const SampleWriterOptions& opts)
    : sink_(sink), opts_(opts) {
  if (opts_.bucket_s == 0) opts_.bucket_s = 10;
  if (opts_.background) thread_ = std::thread([this] { run(); });
}

SampleWriter::~SampleWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SampleWriter::set_flush_observer(FlushObserver f) {
  std::lock_guard lock(mu_);
  observer_ = std::move(f);
}

bool SampleWriter::add(const Sample& s) {
  if (!is_aggregated(s.kind)) return true;
  const uint64_t wall = opts_.wall_now_ns ? opts_.wall_now_ns() : system_wall_now_ns();
  switch (check_sample(s, opts_, wall)) {
    case SampleReject::kNone:
      break;
    case SampleReject::kFuture:
      rejected_future_.fetch_add(1, std::memory_order_relaxed);
      return false;
    case SampleReject::kWcBound:
      rejected_wc_.fetch_add(1, std::memory_order_relaxed);
      return false;
    case SampleReject::kRttBound:
      rejected_rtt_.fetch_add(1, std::memory_order_relaxed);
      return false;
  }
  Key k{prefix_of(s.client, opts_.prefix), bucket_start_of(s.ts_ns, opts_.bucket_s), s.origin};
  pending_[k].add(s, opts_.client_key);
  samples_added_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool SampleWriter::add_flow(const FlowRecord& r) {
  const HalfRecord& h = r.s2c;
  if (h.unique_bytes == 0) return false;
  const uint64_t wall = opts_.wall_now_ns ? opts_.wall_now_ns() : system_wall_now_ns();
  if (r.last_ns > wall && r.last_ns - wall > uint64_t(opts_.clock_skew_s) * 1'000'000'000ULL) {
    rejected_future_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  Key k{prefix_of(r.client, opts_.prefix), bucket_start_of(r.last_ns, opts_.bucket_s),
        SampleOrigin::kGateway};
  LossFigures& l = pending_[k].loss;
  ++l.flows;
  l.never4 += h.max_flight_segments < 4;
  l.fast += h.loss_events_fast;
  l.timeout += h.loss_events_timeout;
  flows_added_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void SampleWriter::drop_oldest_beyond_bound(std::deque<PendingUpdate>& q) {
  while (q.size() > opts_.backlog_max_updates) {
    const Accumulator& a = q.front().update.acc;
    samples_dropped_.fetch_add(a.wc_count + a.rtt_count, std::memory_order_relaxed);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    q.pop_front();
  }
}

void SampleWriter::hand_over(uint64_t capture_now_ns) {
  std::lock_guard lock(mu_);
  for (auto& [k, acc] : pending_) {
    PendingUpdate u;
    u.update.prefix = k.prefix;
    u.update.bucket_start_s = k.bucket_start_s;
    u.update.origin = k.origin;
    u.update.acc = acc;
    handed_.push_back(std::move(u));
  }
  pending_.clear();
  // The flush thread may be stuck in a slow write: the hand-over queue is bounded too.
  drop_oldest_beyond_bound(handed_);
  handed_clock_ns_ = std::max(handed_clock_ns_, capture_now_ns);
  flush_requested_ = true;
}

void SampleWriter::tick(uint64_t capture_now_ns, Clock::time_point wall_now) {
  if (!started_) {
    started_ = true;
    last_handover_ = wall_now;
    return;
  }
  if (wall_now - last_handover_ < std::chrono::milliseconds(opts_.flush_interval_ms)) return;
  last_handover_ = wall_now;
  hand_over(capture_now_ns);
  if (opts_.background)
    cv_.notify_one();
  else
    flush_once();
}

void SampleWriter::flush_once() {
  uint64_t clock_ns;
  FlushObserver observer;
  {
    std::lock_guard lock(mu_);
    while (!handed_.empty()) {
      backlog_.push_back(std::move(handed_.front()));
      handed_.pop_front();
    }
    clock_ns = handed_clock_ns_;
    handed_clock_ns_ = 0;
    flush_requested_ = false;
    observer = observer_;
  }
  drop_oldest_beyond_bound(backlog_);

  std::vector<PendingUpdate> batch(std::make_move_iterator(backlog_.begin()),
                                   std::make_move_iterator(backlog_.end()));
  backlog_.clear();
  std::vector<uint8_t> applied;
  std::string error;
  auto t0 = Clock::now();
  bool ok = sink_.write_updates(batch, clock_ns, applied, error);
  double latency_s = std::chrono::duration<double>(Clock::now() - t0).count();

  uint64_t written = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i < applied.size() && applied[i])
      ++written;
    else
      backlog_.push_back(std::move(batch[i]));  // keeps its seq: a retry is exactly-once
  }
  written_.fetch_add(written, std::memory_order_relaxed);
  backlog_gauge_.store(backlog_.size(), std::memory_order_relaxed);
  uint64_t backlog_samples = 0;
  for (const PendingUpdate& u : backlog_)
    backlog_samples += u.update.acc.wc_count + u.update.acc.rtt_count;
  backlog_samples_.store(backlog_samples, std::memory_order_relaxed);
  if (!batch.empty()) {
    flushes_.fetch_add(1, std::memory_order_relaxed);
    if (!ok) flush_errors_.fetch_add(1, std::memory_order_relaxed);
    last_latency_s_.store(latency_s, std::memory_order_relaxed);
    if (observer) observer(latency_s, ok);
  }
  {
    std::lock_guard lock(mu_);
    if (!ok) last_error_ = error;
    ++flush_generation_;
    flushing_ = false;
    if (flush_generation_ < finish_target_) flush_requested_ = true;
  }
  cv_.notify_all();
}

void SampleWriter::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || flush_requested_; });
    if (stop_) return;
    flushing_ = true;
    lock.unlock();
    flush_once();
    lock.lock();
  }
}

bool SampleWriter::finish(std::chrono::milliseconds max_wait) {
  // Two flushes: the second carries the activity index of what the first wrote (RedisStore
  // writes activity one flush late so that it only counts applied updates).
  hand_over(0);
  if (!opts_.background) {
    flush_once();
    flush_once();
    return backlog_.empty();
  }
  std::unique_lock lock(mu_);
  // A flush already running took its batch before this hand-over: wait for the one after it.
  uint64_t target = flush_generation_ + (flushing_ ? 3 : 2);
  finish_target_ = target;
  flush_requested_ = true;
  cv_.notify_all();
  cv_.wait_for(lock, max_wait, [&] { return flush_generation_ >= target; });
  return flush_generation_ >= target && backlog_gauge_.load() == 0 && handed_.empty();
}

std::string SampleWriter::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

WriterStats SampleWriter::stats() const {
  WriterStats s;
  s.samples_added = samples_added_.load(std::memory_order_relaxed);
  s.flows_added = flows_added_.load(std::memory_order_relaxed);
  s.flushes_total = flushes_.load(std::memory_order_relaxed);
  s.flush_errors_total = flush_errors_.load(std::memory_order_relaxed);
  s.updates_written_total = written_.load(std::memory_order_relaxed);
  s.backlog_updates = backlog_gauge_.load(std::memory_order_relaxed);
  s.backlog_samples = backlog_samples_.load(std::memory_order_relaxed);
  s.backlog_dropped_total = dropped_.load(std::memory_order_relaxed);
  s.samples_dropped_total = samples_dropped_.load(std::memory_order_relaxed);
  s.redis_reconnects_total = sink_.reconnects();
  s.rejected_future = rejected_future_.load(std::memory_order_relaxed);
  s.rejected_wc_bound = rejected_wc_.load(std::memory_order_relaxed);
  s.rejected_rtt_bound = rejected_rtt_.load(std::memory_order_relaxed);
  s.last_flush_latency_s = last_latency_s_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace spand
