#include "path_rate.hpp"

#include <algorithm>

namespace spand::agent {

void PathRates::observe(const Prefix& key_prefix, uint64_t rate_bytes_per_s, uint32_t min_rtt_us,
                        double now_s, uint32_t srtt_us, bool retransmitted) {
  if (rate_bytes_per_s == 0 && min_rtt_us == 0) return;
  const int64_t idx = index_of(now_s);
  Bucket& b = paths_[key_prefix][static_cast<size_t>(idx % kBuckets)];
  if (b.index != idx) b = Bucket{idx, 0, 0, 0, 0, 0, {}};
  b.rate = std::max(b.rate, rate_bytes_per_s);
  b.max_srtt_us = std::max(b.max_srtt_us, srtt_us);
  if (retransmitted) ++b.retransmitting;
  if (min_rtt_us && (b.min_rtt_us == 0 || min_rtt_us < b.min_rtt_us)) b.min_rtt_us = min_rtt_us;
  ++b.samples;
}

void PathRates::observe_train(const Prefix& key_prefix, uint64_t rate_bytes_per_s, double now_s) {
  if (rate_bytes_per_s == 0) return;
  const int64_t idx = index_of(now_s);
  auto& buckets = paths_[key_prefix];
  if (auto median = trains_median(key_prefix, now_s);
      median && rate_bytes_per_s * kTrainFallFactor < median) {
    // The delivery rates too: their max would keep the old path's rate for the window.
    for (Bucket& old : buckets) {
      old.trains.clear();
      old.rate = 0;
    }
    held_.erase(key_prefix);
    confirmed_.erase(key_prefix);
    ++falls_;
  }
  Bucket& b = buckets[static_cast<size_t>(idx % kBuckets)];
  if (b.index != idx) b = Bucket{idx, 0, 0, 0, 0, 0, {}};
  if (b.trains.size() == kMaxTrains) b.trains.erase(b.trains.begin());
  b.trains.push_back(rate_bytes_per_s);
  ++b.samples;
  if (hold_s_ > 0) {
    auto& h = held_[key_prefix];
    std::erase_if(h, [&](const auto& t) { return t.first < now_s - window_s_; });
    if (h.size() == kMaxTrains) h.erase(h.begin());
    h.emplace_back(now_s, rate_bytes_per_s);
  }
}

void PathRates::confirm(const Prefix& key_prefix, uint64_t paced_rate_bytes_per_s, double now_s) {
  if (paced_rate_bytes_per_s == 0 || hold_s_ <= 0) return;
  auto h = held_.find(key_prefix);
  if (h == held_.end()) return;
  const uint64_t median = trains_median(key_prefix, now_s);
  if (median == 0 || paced_rate_bytes_per_s * 10 < median * 9) return;
  confirmed_[key_prefix] = now_s;
}

double PathRates::held_since(const Prefix& key_prefix, double newest_train_s) const {
  auto c = confirmed_.find(key_prefix);
  return c == confirmed_.end() ? newest_train_s : std::max(newest_train_s, c->second);
}

void PathRates::observe_senders(const Prefix& key_prefix, uint32_t senders, double now_s) {
  if (senders == 0) return;
  const auto idx = static_cast<int64_t>(now_s / share_bucket_s_);
  SenderBucket& b = senders_[key_prefix][static_cast<size_t>(idx % 2)];
  if (b.index != idx) b = SenderBucket{idx, {}};
  ++b.dumps[std::min(senders, kMaxSenders)];
}

uint64_t PathRates::trains_median(const Prefix& key_prefix, double now_s) const {
  std::vector<uint64_t> trains;
  if (auto it = paths_.find(key_prefix); it != paths_.end()) {
    const int64_t idx = index_of(now_s);
    for (const Bucket& b : it->second)
      if (b.index >= 0 && idx - b.index < kBuckets)
        trains.insert(trains.end(), b.trains.begin(), b.trains.end());
  }
  if (trains.empty() && hold_s_ > 0) {
    if (auto h = held_.find(key_prefix);
        h != held_.end() && now_s - held_since(key_prefix, h->second.back().first) <= hold_s_)
      for (const auto& t : h->second) trains.push_back(t.second);
  }
  if (trains.empty()) return 0;
  // The lower median.
  auto mid = trains.begin() + static_cast<std::ptrdiff_t>((trains.size() - 1) / 2);
  std::nth_element(trains.begin(), mid, trains.end());
  return *mid;
}

std::optional<PathInfo> PathRates::get(const Prefix& key_prefix, double now_s) const {
  auto it = paths_.find(key_prefix);
  if (it == paths_.end()) return std::nullopt;
  const int64_t idx = index_of(now_s);
  PathInfo info;
  for (const Bucket& b : it->second) {
    if (b.index < 0 || idx - b.index >= kBuckets) continue;  // outside the window
    info.rate_bytes_per_s = std::max(info.rate_bytes_per_s, b.rate);
    if (b.min_rtt_us && (info.min_rtt_us == 0 || b.min_rtt_us < info.min_rtt_us))
      info.min_rtt_us = b.min_rtt_us;
    info.samples += b.samples;
    info.max_srtt_us = std::max(info.max_srtt_us, b.max_srtt_us);
    info.retransmitting += b.retransmitting;
  }
  if (info.samples == 0) return std::nullopt;
  // The trains' median; the larger of it and the delivery rates' max.
  if (const uint64_t median = trains_median(key_prefix, now_s); median) {
    info.rate_bytes_per_s = std::max(info.rate_bytes_per_s, median);
  } else if (require_trains_) {
    info.rate_bytes_per_s = 0;
  }
  if (auto s = senders_.find(key_prefix); s != senders_.end()) {
    const auto sidx = static_cast<int64_t>(now_s / share_bucket_s_);
    std::array<uint64_t, kMaxSenders + 1> dumps{};
    uint64_t total = 0;
    for (const SenderBucket& b : s->second) {
      if (b.index < 0 || sidx - b.index >= 2) continue;
      for (uint32_t n = 1; n <= kMaxSenders; ++n) dumps[n] += b.dumps[n];
    }
    for (uint32_t n = 1; n <= kMaxSenders; ++n) total += dumps[n];
    // The median: the count at rank ceil(total / 2).
    uint64_t seen = 0;
    for (uint32_t n = 1; n <= kMaxSenders && total; ++n) {
      seen += dumps[n];
      if (2 * seen >= total) {
        info.senders = n;
        break;
      }
    }
  }
  return info;
}

void PathRates::expire(double now_s) {
  const auto sidx = static_cast<int64_t>(now_s / share_bucket_s_);
  std::erase_if(senders_, [&](const auto& kv) {
    return std::all_of(kv.second.begin(), kv.second.end(),
                       [&](const SenderBucket& b) { return b.index < 0 || sidx - b.index >= 2; });
  });
  std::erase_if(held_, [&](const auto& kv) {
    return now_s - held_since(kv.first, kv.second.back().first) > hold_s_;
  });
  std::erase_if(confirmed_, [&](const auto& kv) { return !held_.count(kv.first); });
  const int64_t idx = index_of(now_s);
  std::erase_if(paths_, [&](const auto& kv) {
    return std::all_of(kv.second.begin(), kv.second.end(),
                       [&](const Bucket& b) { return b.index < 0 || idx - b.index >= kBuckets; });
  });
}

}  // namespace spand::agent
