#include "agent_core.hpp"

#include <algorithm>
#include <cstdio>

namespace spand::agent {

namespace {
// Re-ask the source this often even when it pushes nothing, so a missed push heals.
constexpr double kRefetchS = 30;
constexpr double kBackoffMinS = 0.5;
constexpr double kBackoffMaxS = 30;
// Forget a prefix this long after its last connection.
constexpr double kForgetS = 600;
// After a failed kernel write, wait this long before trying the same (port, prefix) again.
constexpr double kApplyRetryS = 30;
}  // namespace

AgentCore::AgentCore(const AgentConfig& cfg, EstimateSource& source, KernelApplier& applier,
                     Clock& clock, std::set<std::string> available_cc)
    : cfg_(cfg),
      source_(source),
      applier_(applier),
      clock_(clock),
      available_cc_(std::move(available_cc)) {
  double now = clock_.now_s();
  for (const Prefix& p : cfg_.static_prefixes) {
    CacheEntry& e = cache_[key_of(p)];
    e.is_static = true;
    e.last_seen_s = now;
  }
}

void AgentCore::set_prefix_map(std::shared_ptr<const PrefixMap> map) {
  map_ = std::move(map);
  const double now = clock_.now_s();
  for (auto& [p, e] : cache_) {
    // Gone at the next tick (policy removed) unless observe() or the static list keeps it.
    e.is_static = false;
    e.last_seen_s = now - 2 * kForgetS;
  }
  for (const Prefix& p : cfg_.static_prefixes) {
    CacheEntry& e = cache_[key_of(p)];
    e.is_static = true;
    e.last_seen_s = now;
  }
}

Prefix AgentCore::key_prefix(const Prefix& remote) const {
  bool uncovered = false;
  const Prefix key = key_of(remote, &uncovered);
  if (uncovered) ++counters_.prefix_map_uncovered_total;
  return key;
}

Prefix AgentCore::key_of(const Prefix& remote, bool* uncovered) const {
  // The prefix the service answers for (it maps a CIDR to the longest prefix holding it all).
  if (map_) {
    if (std::optional<Prefix> m = map_->longest_holding(remote)) return *m;
    if (uncovered) *uncovered = true;
  }
  uint32_t want = remote.v4 ? cfg_.prefix_len_v4 : cfg_.prefix_len_v6;
  // A configured prefix shorter than the estimate granularity is kept as given.
  if (remote.len_bits < want) return remote;
  return remote.truncated(static_cast<uint8_t>(want));
}

void AgentCore::observe(const Prefix& remote) {
  double now = clock_.now_s();
  Prefix p = key_prefix(remote);
  auto it = cache_.find(p);
  if (it != cache_.end()) {
    if (it->second.estimate) ++counters_.cache_hits_total;
    it->second.last_seen_s = now;
    return;
  }
  CacheEntry& e = cache_[p];
  e.last_seen_s = now;
}

std::vector<Prefix> AgentCore::wanted() const {
  std::vector<Prefix> out;
  for (const auto& [p, e] : cache_) out.push_back(p);
  return out;
}

std::vector<const PortConfig*> AgentCore::ports() const {
  std::vector<const PortConfig*> out;
  if (applier_.per_port()) {
    for (const auto& pc : cfg_.ports) out.push_back(&pc);
  } else if (const PortConfig* pc = cfg_.port(0)) {
    out.push_back(pc);  // routes know no ports: the port-0 entry, else the first port
  } else if (!cfg_.ports.empty()) {
    out.push_back(&cfg_.ports.front());
  }
  return out;
}

void AgentCore::store(const Estimate& est, double now) {
  CacheEntry& e = cache_[est.prefix];
  if (e.last_seen_s == 0) e.last_seen_s = now;
  e.estimate = est;
  e.received_s = now;
  e.backoff_s = 0;
  e.next_fetch_s = now + kRefetchS;
}

const PathInfo* AgentCore::path_for(const Prefix& prefix, double now, PathInfo& tmp) const {
  if (!paths_) return nullptr;
  auto info = paths_->get(prefix, now);
  if (!info) return nullptr;
  tmp = *info;
  return &tmp;
}

void AgentCore::reconcile(const Prefix& prefix, CacheEntry& e, double now) {
  PathInfo tmp;
  const PathInfo* path = path_for(prefix, now, tmp);
  for (const PortConfig* pc : ports()) {
    PolicyKey key{applier_.per_port() ? pc->port : uint16_t{0}, prefix};
    Decision d;
    if (!e.estimate) {
      d.skip = SkipReason::kNoEstimate;
      if (path) {  // the host's own view of the path may be enough (WindowRule::kRounds)
        Estimate none;
        none.prefix = prefix;
        d = decide(none, 0, *pc, cfg_.policy, available_cc_, path);
        if (d.skip != SkipReason::kNone) d.skip = SkipReason::kNoEstimate;
      }
    } else {
      double age = e.estimate->age_s + (now - e.received_s);
      d = decide(*e.estimate, age, *pc, cfg_.policy, available_cc_, path);
    }
    auto it = installed_.find(key);
    std::string err;
    if (d.skip == SkipReason::kNone) {
      d.policy.key = key;
      // The kernel stops applying the policy by itself when the estimate turns stale here
      // (the agent may die without removing it); the host's own readings last max_age_s.
      d.policy.expires_s = e.estimate ? e.received_s + cfg_.policy.max_age_s - e.estimate->age_s
                                      : now + cfg_.policy.max_age_s;
      if (it != installed_.end()) {
        KernelPolicy same = it->second;
        same.expires_s = d.policy.expires_s;
        if (same == d.policy) {
          // Only the deadline moved: the kernel's copy is renewed once it comes near, not at
          // every refetch (an earlier kernel deadline only ends the policy sooner after a crash).
          if (d.policy.expires_s <= it->second.expires_s ||
              it->second.expires_s - now > renew_before_s())
            continue;
          if (applier_.renew(d.policy, err)) {
            it->second.expires_s = d.policy.expires_s;
            ++counters_.renewed_total;
          } else {
            ++counters_.apply_errors_total;
            std::fprintf(stderr, "spand-agent: %s: %s\n", prefix.str().c_str(), err.c_str());
          }
          continue;
        }
      }
      if (auto f = failed_until_s_.find(key); f != failed_until_s_.end()) {
        if (now < f->second) continue;
        failed_until_s_.erase(f);
      }
      if (applier_.upsert(d.policy, err)) {
        installed_[key] = d.policy;
        ++counters_.applied_total;
      } else {
        ++counters_.apply_errors_total;
        failed_until_s_[key] = now + kApplyRetryS;
        std::fprintf(stderr, "spand-agent: %s: %s\n", prefix.str().c_str(), err.c_str());
      }
    } else if (it != installed_.end()) {
      // The kernel default comes back: a stale or withdrawn estimate must not linger.
      if (applier_.remove(key, err))
        installed_.erase(it);
      else
        ++counters_.apply_errors_total;
      count_skip(d.skip);
    }
  }
}

double AgentCore::renew_before_s() const {
  return std::max(cfg_.policy.max_age_s / 2, 3 * cfg_.refresh_interval_ms / 1000.0);
}

void AgentCore::tick() {
  double now = clock_.now_s();
  for (const Estimate& est : source_.take_updates()) {
    auto found = cache_.find(est.prefix);
    if (found == cache_.end()) continue;  // not ours (any more)
    // About to be forgotten below (idle, or left behind by a new prefix map): not applied.
    if (!found->second.is_static && now - found->second.last_seen_s > kForgetS) continue;
    store(est, now);
    auto& e = cache_[est.prefix];
    // A fresh push decides anew: count the decision even if nothing changes in the kernel.
    PathInfo tmp;
    const PathInfo* path = path_for(est.prefix, now, tmp);
    for (const PortConfig* pc : ports()) {
      Decision d = decide(est, est.age_s, *pc, cfg_.policy, available_cc_, path);
      if (d.skip != SkipReason::kNone) count_skip(d.skip);
    }
    reconcile(est.prefix, e, now);
  }

  std::vector<Prefix> forget;
  for (auto& [prefix, e] : cache_) {
    if (!e.is_static && now - e.last_seen_s > kForgetS) {
      forget.push_back(prefix);
      continue;
    }
    if (now >= e.next_fetch_s) {
      FetchResult r = source_.get(prefix);
      switch (r.status) {
        case FetchStatus::kOk: {
          store(*r.estimate, now);
          PathInfo tmp;
          const PathInfo* path = path_for(prefix, now, tmp);
          for (const PortConfig* pc : ports()) {
            Decision d =
                decide(*r.estimate, r.estimate->age_s, *pc, cfg_.policy, available_cc_, path);
            if (d.skip != SkipReason::kNone) count_skip(d.skip);
          }
          break;
        }
        case FetchStatus::kNotFound:
          e.estimate.reset();
          e.backoff_s = 0;
          e.next_fetch_s = now + kRefetchS;
          count_skip(SkipReason::kNoEstimate);
          break;
        case FetchStatus::kUnavailable:
          ++counters_.source_errors_total;
          count_skip(SkipReason::kUnavailable);
          e.backoff_s = std::clamp(e.backoff_s * 2, kBackoffMinS, kBackoffMaxS);
          e.next_fetch_s = now + e.backoff_s;
          break;
      }
    }
    reconcile(prefix, e, now);
  }
  for (const Prefix& p : forget) {
    CacheEntry& e = cache_[p];
    e.estimate.reset();
    reconcile(p, e, now);
    cache_.erase(p);
  }
  std::vector<Prefix> want = wanted();
  if (want != watched_) {
    source_.watch(want);
    watched_ = std::move(want);
  }
}

void AgentCore::shutdown() {
  std::string err;
  for (const auto& [key, pol] : installed_) applier_.remove(key, err);
  installed_.clear();
  applier_.stop();
}

}  // namespace spand::agent
