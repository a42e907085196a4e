#include "estimates/redis_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "estimates/redis_schema.hpp"

namespace spand {

namespace {

std::string random_writer_id() {
  std::random_device rd;
  uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

double to_double(const RedisReply& r) {
  return r.str.empty() ? 0.0 : std::strtod(r.str.c_str(), nullptr);
}

// An HMGET of the window's bucket fields (nil for buckets without samples) into an Accumulator.
bool parse_window_reply(const RedisReply& r, Accumulator& out, std::string& error) {
  if (r.is_error()) {
    error = r.str;
    return false;
  }
  if (r.type != RedisReply::Type::kArray) {
    error = "unexpected reply to the window read";
    return false;
  }
  out = Accumulator{};
  for (const RedisReply& e : r.elements) {
    if (e.type != RedisReply::Type::kString) continue;
    if (!add_bucket_value(e.str, out)) {
      error = "malformed bucket value '" + e.str + "'";
      return false;
    }
  }
  return true;
}

}  // namespace

bool redis_store_options_from(const EstimatesOptions& opts, RedisStoreOptions& out,
                              std::string& error) {
  out = RedisStoreOptions{};
  out.window.window_s = opts.window_s;
  out.window.bucket_s = opts.bucket_s;
  out.clock_skew_s = opts.clock_skew_s;
  out.window.key_prefix = opts.redis_key_prefix;
  if (!valid_key_prefix(opts.redis_key_prefix, error)) return false;
  if (opts.bucket_s == 0 || opts.window_s == 0) {
    error = "bucket and window must be at least one second";
    return false;
  }
  if (!opts.redis_url.empty() &&
      !parse_redis_url(opts.redis_url, out.endpoint, out.conn.auth, error))
    return false;
  for (const std::string& s : opts.redis_cluster_seeds) {
    RedisEndpoint ep;
    if (!parse_endpoint(s, ep, error)) return false;
    out.cluster_seeds.push_back(ep);
  }
  if (!opts.redis_password_file.empty() &&
      !read_password_file(opts.redis_password_file, out.conn.auth.password, error))
    return false;
  return true;
}

RedisStore::RedisStore(const RedisStoreOptions& opts)
    : opts_(opts),
      ttl_s_(opts.key_ttl_s ? opts.key_ttl_s : opts.window.window_s + opts.window.bucket_s),
      writer_id_(random_writer_id()) {
  exec_ = opts.cluster_seeds.empty() ? make_single_node_executor(opts.endpoint, opts.conn)
                                     : make_cluster_executor(opts.cluster_seeds, opts.conn);
  exec_->preload(&write_bucket_script());
  exec_->preload(&add_activity_script());
  exec_->preload(&top_script());
}

RedisCommand RedisStore::write_command(const PendingUpdate& u) const {
  const BucketUpdate& b = u.update;
  const Accumulator& a = b.acc;
  RedisCommand c;
  c.route_key = window_key(b.prefix, opts_.window.key_prefix);
  c.script = &write_bucket_script();
  c.argv = evalsha_argv(
      *c.script, {c.route_key},
      {writer_id_, std::to_string(u.seq), bucket_field(b.bucket_start_s),
       std::to_string(a.wc_count), format_double(a.wc_sum), format_double(a.wc_sumsq),
       std::to_string(a.rtt_count), format_double(a.rtt_sum_us),
       std::to_string(a.rtt_count ? a.rtt_min_us : 0), std::to_string(a.newest_ts_ns),
       b.origin == SampleOrigin::kAgent ? "agent" : "gw", std::to_string(a.wc_count + a.rtt_count),
       std::to_string(ttl_s_), std::to_string(a.wc_clients), format_rtt_hist(a), format_wc_table(a),
       format_loss(a.loss)});
  return c;
}

void RedisStore::append_activity_commands(std::vector<RedisCommand>& cmds,
                                          const ActivityMap& activity, uint64_t clock_ns) {
  const RedisScript& s = add_activity_script();
  bool clock_sent = false;
  std::string clock = std::to_string(clock_ns);
  const std::string skew = std::to_string(opts_.clock_skew_s);
  for (const auto& [bucket, per_prefix] : activity) {
    RedisArgv args = {std::to_string(ttl_s_), clock, skew};
    // The key is computed outside: clang before 16 cannot capture a structured binding.
    auto flush_chunk = [&, key = activity_key(bucket, opts_.window.key_prefix)] {
      RedisCommand c;
      c.route_key = key;
      c.script = &s;
      c.argv = evalsha_argv(s, {c.route_key, clock_key(opts_.window.key_prefix)}, args);
      cmds.push_back(std::move(c));
      clock_sent = true;
      args = {std::to_string(ttl_s_), clock, skew};
    };
    for (const auto& [prefix, samples] : per_prefix) {
      args.push_back(prefix);
      args.push_back(std::to_string(samples));
      if (args.size() >= 3 + 2 * size_t(opts_.activity_chunk)) flush_chunk();
    }
    if (args.size() > 3) flush_chunk();
  }
  if (!clock_sent && clock_ns != 0) {
    RedisCommand c;
    c.route_key = clock_key(opts_.window.key_prefix);
    c.script = &s;
    c.argv = evalsha_argv(s, {activity_key(0, opts_.window.key_prefix), c.route_key},
                          {std::to_string(ttl_s_), clock, skew});
    cmds.push_back(std::move(c));
  }
}

bool RedisStore::write_updates(std::vector<PendingUpdate>& updates, uint64_t clock_ns,
                               std::vector<uint8_t>& applied, std::string& error) {
  std::lock_guard lock(mu_);
  applied.assign(updates.size(), 0);
  std::vector<RedisCommand> cmds;
  cmds.reserve(updates.size() + 4);
  for (PendingUpdate& u : updates) {
    if (u.seq == 0) u.seq = next_seq_++;
    cmds.push_back(write_command(u));
  }
  uint64_t clock = std::max(clock_ns, clock_pending_ns_);
  clock_pending_ns_ = 0;
  // The activity of updates applied by earlier flushes rides in this flush's pipeline.
  ActivityMap activity_sent = std::move(activity_pending_);
  activity_pending_.clear();
  append_activity_commands(cmds, activity_sent, clock);
  if (!key_fingerprint_.empty() && !client_key_agrees_locked(!cmds.empty(), error)) {
    // Nothing written: the updates stay with the writer, the activity and clock for later.
    for (auto& [bucket, per_prefix] : activity_sent)
      for (auto& [prefix, samples] : per_prefix) activity_pending_[bucket][prefix] += samples;
    clock_pending_ns_ = std::max(clock_pending_ns_, clock);
    return false;
  }
  if (cmds.empty()) return true;

  std::vector<RedisResult> results;
  exec_->execute(cmds, results);

  size_t failed = 0;
  std::string first_error;
  for (size_t i = 0; i < updates.size(); ++i) {
    const RedisResult& r = results[i];
    if (r.delivered && !r.reply.is_error()) {
      applied[i] = 1;
      if (r.reply.type == RedisReply::Type::kInteger && r.reply.integer == 0) {
        ++duplicates_;
        continue;
      }
      const BucketUpdate& b = updates[i].update;
      // An update of loss figures alone (flow records) has no samples: not activity.
      if (b.acc.wc_count + b.acc.rtt_count > 0)
        activity_pending_[b.bucket_start_s][b.prefix.to_string()] +=
            b.acc.wc_count + b.acc.rtt_count;
      clock_pending_ns_ = std::max(clock_pending_ns_, b.acc.newest_ts_ns);
    } else {
      ++failed;
      if (first_error.empty()) first_error = r.delivered ? r.reply.str : r.error;
    }
  }
  bool activity_ok = true;
  for (size_t i = updates.size(); i < cmds.size(); ++i) {
    const RedisResult& r = results[i];
    if (!r.delivered || r.reply.is_error()) {
      activity_ok = false;
    } else if (r.reply.type == RedisReply::Type::kInteger) {
      if (r.reply.integer & 2) ++clock_clamped_;
      if (r.reply.integer & 4) ++clock_repaired_;
    }
  }
  if (!activity_ok) {
    // Not applied (or unknown): merge back so the next flush carries it again.
    ++activity_errors_;
    for (auto& [bucket, per_prefix] : activity_sent)
      for (auto& [prefix, samples] : per_prefix) activity_pending_[bucket][prefix] += samples;
    clock_pending_ns_ = std::max(clock_pending_ns_, clock);
  }
  if (failed) {
    error = std::to_string(failed) + " of " + std::to_string(updates.size()) +
            " updates not written: " + first_error;
    return false;
  }
  if (!activity_ok) {
    error = "activity/clock write failed";
    return false;
  }
  return true;
}

bool RedisStore::write(const std::vector<BucketUpdate>& updates, std::string& error) {
  std::vector<PendingUpdate> pending;
  pending.reserve(updates.size());
  for (const BucketUpdate& u : updates) pending.push_back({u, 0});
  std::vector<uint8_t> applied;
  return write_updates(pending, 0, applied, error);
}

RedisCommand RedisStore::read_command(const Prefix& prefix, uint64_t now_ns) const {
  RedisCommand c;
  c.route_key = window_key(prefix, opts_.window.key_prefix);
  c.argv.reserve(32);
  c.argv.push_back("HMGET");
  c.argv.push_back(c.route_key);
  for (uint64_t b : window_buckets(now_ns, opts_.window.window_s, opts_.window.bucket_s))
    c.argv.push_back(bucket_field(b));
  return c;
}

void RedisStore::read_windows(WindowRead* const* reads, size_t n) {
  std::vector<RedisCommand> cmds;
  cmds.reserve(n);
  for (size_t i = 0; i < n; ++i) cmds.push_back(read_command(reads[i]->prefix, reads[i]->now_ns));
  std::vector<RedisResult> results;
  {
    std::lock_guard lock(mu_);
    exec_->execute(cmds, results);
  }
  for (size_t i = 0; i < n; ++i) {
    WindowRead& r = *reads[i];
    r.error.clear();
    r.ok = false;
    if (!results[i].delivered)
      r.error = results[i].error;
    else
      r.ok = parse_window_reply(results[i].reply, r.acc, r.error);
  }
}

bool RedisStore::read_windows(const std::vector<Prefix>& prefixes, uint64_t now_ns,
                              std::vector<Accumulator>& out, std::vector<uint8_t>& ok,
                              std::string& error) {
  std::vector<WindowRead> reads(prefixes.size());
  std::vector<WindowRead*> ptrs(prefixes.size());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    reads[i].prefix = prefixes[i];
    reads[i].now_ns = now_ns;
    ptrs[i] = &reads[i];
  }
  read_windows(ptrs.data(), ptrs.size());
  out.assign(prefixes.size(), Accumulator{});
  ok.assign(prefixes.size(), 0);
  bool all = true;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    out[i] = reads[i].acc;
    ok[i] = reads[i].ok;
    if (!reads[i].ok) {
      if (all) error = prefixes[i].to_string() + ": " + reads[i].error;
      all = false;
    }
  }
  return all;
}

bool RedisStore::read_window(const Prefix& prefix, uint64_t now_ns, Accumulator& out,
                             std::string& error) {
  std::vector<Accumulator> accs;
  std::vector<uint8_t> ok;
  bool r = read_windows({prefix}, now_ns, accs, ok, error);
  if (r) out = accs[0];
  return r;
}

bool RedisStore::top_prefixes(uint64_t now_ns, size_t limit, std::vector<PrefixActivity>& out,
                              std::string& error) {
  out.clear();
  if (limit == 0) return true;
  RedisArgv keys;
  for (uint64_t b : window_buckets(now_ns, opts_.window.window_s, opts_.window.bucket_s))
    keys.push_back(activity_key(b, opts_.window.key_prefix));
  if (keys.empty()) return true;
  keys.push_back(top_scratch_key(opts_.window.key_prefix));
  RedisCommand c;
  c.route_key = keys.back();
  c.script = &top_script();
  c.argv = evalsha_argv(*c.script, keys, {std::to_string(limit)});
  std::vector<RedisResult> results;
  {
    std::lock_guard lock(mu_);
    exec_->execute({c}, results);
  }
  if (!results[0].delivered || results[0].reply.is_error()) {
    error = results[0].delivered ? results[0].reply.str : results[0].error;
    return false;
  }
  const auto& e = results[0].reply.elements;
  for (size_t i = 0; i + 1 < e.size(); i += 2) {
    PrefixActivity a;
    if (!parse_cidr(e[i].str, a.prefix)) continue;  // not written by spand
    a.samples = uint64_t(to_double(e[i + 1]));
    out.push_back(a);
  }
  return true;
}

bool RedisStore::read_clock(uint64_t& now_ns, std::string& error) {
  RedisCommand c;
  c.route_key = clock_key(opts_.window.key_prefix);
  c.argv = {"GET", c.route_key};
  std::vector<RedisResult> results;
  {
    std::lock_guard lock(mu_);
    exec_->execute({c}, results);
  }
  if (!results[0].delivered || results[0].reply.is_error()) {
    error = results[0].delivered ? results[0].reply.str : results[0].error;
    return false;
  }
  now_ns = results[0].reply.type == RedisReply::Type::kString
               ? std::strtoull(results[0].reply.str.c_str(), nullptr, 10)
               : 0;
  return true;
}

void RedisStore::expect_client_key(const std::string& fingerprint) {
  std::lock_guard lock(mu_);
  key_fingerprint_ = fingerprint;
  key_state_ = ClientKeyState::kUnchecked;
}

bool RedisStore::client_key_agrees_locked(bool writing, std::string& error) {
  const auto now = std::chrono::steady_clock::now();
  const ClientKeyState state = key_state_.load(std::memory_order_relaxed);
  if (state == ClientKeyState::kAgreed &&
      (!writing || now - key_checked_at_ < opts_.client_key_recheck))
    return true;
  const std::string key = client_key_fp_key(opts_.window.key_prefix);
  std::vector<RedisCommand> cmds;
  if (state != ClientKeyState::kAgreed) {  // claim it if no writer has
    RedisCommand set;
    set.route_key = key;
    set.argv = {"SET", key, key_fingerprint_, "NX"};
    cmds.push_back(std::move(set));
  }
  RedisCommand get;
  get.route_key = key;
  get.argv = {"GET", key};
  cmds.push_back(std::move(get));
  std::vector<RedisResult> results;
  exec_->execute(cmds, results);
  for (const RedisResult& r : results) {
    if (!r.delivered || r.reply.is_error()) {
      // A re-check that did not get through proves nothing: write, and check at the next flush.
      if (state == ClientKeyState::kAgreed) return true;
      error = "client id key check (" + key + "): " + (r.delivered ? r.reply.str : r.error);
      return false;
    }
  }
  key_checked_at_ = now;
  const RedisReply& stored = results.back().reply;
  if (stored.type == RedisReply::Type::kString && stored.str == key_fingerprint_) {
    key_state_ = ClientKeyState::kAgreed;
    return true;
  }
  if (stored.type != RedisReply::Type::kString) {
    if (state == ClientKeyState::kAgreed) return true;  // deleted since: the next writer claims it
    error = "client id key check (" + key + "): deleted while it was claimed; trying again";
    return false;
  }
  key_state_ = ClientKeyState::kMismatch;
  key_mismatches_.fetch_add(1, std::memory_order_relaxed);
  error = "client id key mismatch: this writer's key has fingerprint " + key_fingerprint_ + ", " +
          key + " holds " + stored.str.substr(0, 64) +
          ": the writers of this Redis use different --client-key-file keys (their samples would "
          "count one client under two ids); nothing is written until they agree";
  return false;
}

uint64_t RedisStore::reconnects() const {
  std::lock_guard lock(mu_);
  return exec_->reconnects();
}

RedisStoreStats RedisStore::stats() const {
  std::lock_guard lock(mu_);
  RedisStoreStats s;
  s.duplicates_skipped = duplicates_;
  s.activity_errors = activity_errors_;
  s.clock_clamped = clock_clamped_;
  s.clock_repaired = clock_repaired_;
  s.reconnects = exec_->reconnects();
  s.slot_refreshes = exec_->slot_refreshes();
  s.redirects = exec_->redirects();
  s.nodes = exec_->node_stats();
  return s;
}

}  // namespace spand
