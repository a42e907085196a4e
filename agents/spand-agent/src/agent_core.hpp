// The daemon's core: which prefixes matter, the estimate cache (honouring each estimate's
// age), and the reconciliation of decisions into the kernel through a KernelApplier. No I/O
// of its own, so unit tests drive it with a fake EstimateSource, applier and clock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "applier.hpp"
#include "config.hpp"
#include "estimate.hpp"
#include "path_rate.hpp"
#include "policy.hpp"
#include "prefix_map.hpp"

namespace spand::agent {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_s() = 0;  // monotonic seconds
};

struct CoreCounters {
  uint64_t applied_total = 0;
  std::array<uint64_t, static_cast<size_t>(SkipReason::kCount)> skipped_total{};
  uint64_t cache_hits_total = 0;
  uint64_t source_errors_total = 0;
  uint64_t apply_errors_total = 0;
  uint64_t renewed_total = 0;  // kernel deadlines moved on (KernelApplier::renew)
  // With a prefix map: lookups of client addresses no prefix of the map covers (key_prefix),
  // keyed by the fixed /24 or /48 instead.
  uint64_t prefix_map_uncovered_total = 0;
};

class AgentCore {
 public:
  AgentCore(const AgentConfig& cfg, EstimateSource& source, KernelApplier& applier, Clock& clock,
            std::set<std::string> available_cc = {});

  // What this host measures toward each prefix (WindowRule::kRounds); optional, not owned.
  void set_path_rates(const PathRates* paths) { paths_ = paths; }
  // Network-aware clustering (prefix_map.hpp): clients are keyed, asked for and installed under
  // the longest prefix of `map` that holds them, the fixed lengths when none does; nullptr: the
  // fixed lengths only. A new map re-keys the static prefixes and lets every other prefix go at
  // the next tick unless a connection is seen again (it then comes back under its new key).
  void set_prefix_map(std::shared_ptr<const PrefixMap> map);
  // A connection from `remote` (an address, any length) was seen on a local port.
  void observe(const Prefix& remote);
  // Pushed updates, fetches of prefixes without a fresh estimate (with backoff when the
  // source is unavailable), expiry, and kernel reconciliation.
  void tick();
  // Removes everything from the kernel (exit path).
  void shutdown();

  const CoreCounters& counters() const { return counters_; }
  size_t installed() const { return installed_.size(); }
  const std::map<PolicyKey, KernelPolicy>& installed_policies() const { return installed_; }
  std::vector<Prefix> wanted() const;
  // The key of a client address (or CIDR): the map's longest prefix holding it, else the fixed
  // length; a lookup no prefix of the map covers is counted (prefix_map_uncovered_total).
  Prefix key_prefix(const Prefix& remote) const;

 private:
  struct CacheEntry {
    std::optional<Estimate> estimate;
    double received_s = 0;
    double next_fetch_s = 0;  // refetch or retry time
    double backoff_s = 0;     // grows while the source is unavailable
    double last_seen_s = 0;   // last observed connection (or static)
    bool is_static = false;
  };

  void store(const Estimate& est, double now);
  void reconcile(const Prefix& prefix, CacheEntry& e, double now);
  std::vector<const PortConfig*> ports() const;
  void count_skip(SkipReason r) { ++counters_.skipped_total[static_cast<size_t>(r)]; }
  // key_prefix() without counting (configured static prefixes are no client's lookup);
  // `uncovered`, when given, set when a map is in use and no prefix of it holds `remote`.
  Prefix key_of(const Prefix& remote, bool* uncovered = nullptr) const;
  // A kernel deadline closer than this is moved on (renewed) at the next reconcile.
  double renew_before_s() const;
  // The path toward `prefix` into `tmp`; nullptr when nothing is known.
  const PathInfo* path_for(const Prefix& prefix, double now, PathInfo& tmp) const;
  const PathRates* paths_ = nullptr;
  std::shared_ptr<const PrefixMap> map_;

  const AgentConfig& cfg_;
  EstimateSource& source_;
  KernelApplier& applier_;
  Clock& clock_;
  std::set<std::string> available_cc_;
  std::map<Prefix, CacheEntry> cache_;
  std::map<PolicyKey, KernelPolicy> installed_;
  std::map<PolicyKey, double> failed_until_s_;  // no retry (and no log) before this time
  std::vector<Prefix> watched_;
  mutable CoreCounters counters_;  // mutable: key_prefix() counts uncovered lookups
};

}  // namespace spand::agent
