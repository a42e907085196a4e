#include "service/watch_hub.hpp"

#include <algorithm>
#include <chrono>

namespace spand {
namespace {
// Bound per subscriber: a stream that stops reading loses its oldest events, not our memory.
constexpr size_t kMaxQueuedEvents = 4096;
}  // namespace

std::vector<WatchHub::Event> WatchHub::Subscription::wait(uint32_t timeout_ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return !queue_.empty() || stopped_.load(); });
  std::vector<Event> out(std::make_move_iterator(queue_.begin()),
                         std::make_move_iterator(queue_.end()));
  queue_.clear();
  pending_new_.clear();
  return out;
}

WatchHub::WatchHub(EstimatesCore& core, uint32_t refresh_interval_ms)
    : core_(core), refresh_interval_ms_(std::max<uint32_t>(refresh_interval_ms, 10)) {
  thread_ = std::thread([this] { run(); });
}

WatchHub::~WatchHub() {
  stop();
}

void WatchHub::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& sub : subs_) {
      std::lock_guard sl(sub->mu_);
      sub->stopped_ = true;
      sub->cv_.notify_all();
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<WatchHub::Subscription> WatchHub::subscribe(const std::vector<Prefix>& prefixes) {
  auto sub = std::make_shared<Subscription>();
  sub->prefixes_ = prefixes;
  std::lock_guard lock(mu_);
  if (stopping_) sub->stopped_ = true;
  subs_.push_back(sub);
  subscribers_.store(subs_.size());
  return sub;
}

void WatchHub::unsubscribe(const std::shared_ptr<Subscription>& sub) {
  std::lock_guard lock(mu_);
  std::erase(subs_, sub);
  subscribers_.store(subs_.size());
  // Forget signatures no one watches any more, so the map stays as small as the subscriptions.
  std::erase_if(last_, [&](const auto& kv) {
    return std::none_of(subs_.begin(), subs_.end(), [&](const auto& s) {
      return std::find(s->prefixes_.begin(), s->prefixes_.end(), kv.first) != s->prefixes_.end();
    });
  });
}

void WatchHub::push(Subscription& sub, Event ev) {
  std::lock_guard lock(sub.mu_);
  if (ev.reason == v1::WatchEvent::NEW_CONNECTION && !sub.pending_new_.insert(ev.prefix).second) {
    return;
  }
  if (sub.queue_.size() >= kMaxQueuedEvents) sub.queue_.pop_front();
  sub.queue_.push_back(std::move(ev));
  events_pushed_.fetch_add(1, std::memory_order_relaxed);
  sub.cv_.notify_one();
}

void WatchHub::seed(const Prefix& p, const v1::Estimate& est) {
  std::lock_guard lock(mu_);
  last_.try_emplace(p, signature_of(est));
}

void WatchHub::notify_new_connection(const Prefix& p) {
  if (subscribers_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mu_);
  for (auto& sub : subs_) {
    if (std::find(sub->prefixes_.begin(), sub->prefixes_.end(), p) != sub->prefixes_.end()) {
      push(*sub, Event{v1::WatchEvent::NEW_CONNECTION, p, {}});
    }
  }
}

void WatchHub::request_refresh() {
  if (subscribers_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard lock(mu_);
    refresh_requested_ = true;
  }
  cv_.notify_all();
}

void WatchHub::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(refresh_interval_ms_),
                 [&] { return stopping_ || refresh_requested_; });
    if (stopping_) break;
    refresh_requested_ = false;
    lock.unlock();
    refresh();
    lock.lock();
  }
}

void WatchHub::refresh() {
  std::vector<Prefix> watched;
  {
    std::lock_guard lock(mu_);
    std::unordered_set<Prefix, PrefixHash> seen;
    for (const auto& sub : subs_) {
      for (const Prefix& p : sub->prefixes_) {
        if (seen.insert(p).second) watched.push_back(p);
      }
    }
  }
  // Store reads happen outside the hub's lock: subscribe/notify never wait on Redis.
  for (const Prefix& p : watched) {
    v1::Estimate est;
    if (!core_.estimate_prefix(p, false, est).ok()) continue;
    const Signature sig = signature_of(est);
    std::lock_guard lock(mu_);
    auto [it, inserted] = last_.try_emplace(p, sig);
    if (inserted || it->second == sig) continue;  // a first sighting is the baseline, not news
    it->second = sig;
    for (auto& sub : subs_) {
      if (std::find(sub->prefixes_.begin(), sub->prefixes_.end(), p) != sub->prefixes_.end()) {
        push(*sub, Event{v1::WatchEvent::UPDATED, p, est});
      }
    }
  }
}

}  // namespace spand
