// Subscriptions of Watch streams. Two triggers push an event to a subscriber:
//  - UPDATED: a refresh (after each flush, and periodically, so that writes by other gateways
//    sharing the Redis are seen too) re-reads every subscribed prefix and finds it changed;
//  - NEW_CONNECTION: the gateway saw a new inbound connection from the prefix (the paper's
//    "active push"). notify_new_connection() runs on the control thread: it never touches
//    Redis, only queues the prefix; the stream's own thread reads the estimate.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dataplane/prefix.hpp"
#include "service/estimates_core.hpp"

namespace spand {

class WatchHub {
 public:
  struct Event {
    v1::WatchEvent::Reason reason;
    Prefix prefix;
    v1::Estimate estimate;  // filled for UPDATED; NEW_CONNECTION is read by the stream
  };

  class Subscription {
   public:
    // Waits up to `timeout_ms` for events; returns them (empty on timeout or after stop).
    std::vector<Event> wait(uint32_t timeout_ms);
    bool stopped() const { return stopped_.load(); }

   private:
    friend class WatchHub;
    std::vector<Prefix> prefixes_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Event> queue_;
    std::unordered_set<Prefix, PrefixHash> pending_new_;  // coalesces connection bursts
    std::atomic<bool> stopped_{false};
  };

  // `refresh_interval_ms`: how often subscribed prefixes are re-read even without a local
  // flush. The hub's thread starts here and stops in stop() / the destructor.
  WatchHub(EstimatesCore& core, uint32_t refresh_interval_ms);
  ~WatchHub();

  std::shared_ptr<Subscription> subscribe(const std::vector<Prefix>& prefixes);
  void unsubscribe(const std::shared_ptr<Subscription>& sub);
  // Records what the subscriber has already seen of `p` (the stream reads every prefix when it
  // starts), so the first refresh only reports real changes.
  void seed(const Prefix& p, const v1::Estimate& est);
  void notify_new_connection(const Prefix& p);
  // Asks the hub's thread to re-read the subscribed prefixes now (after a local flush).
  void request_refresh();
  void stop();
  size_t subscriber_count() const { return subscribers_.load(); }
  uint64_t events_pushed() const { return events_pushed_.load(); }

 private:
  // What identifies a change of a prefix's window.
  struct Signature {
    uint64_t samples = 0;
    uint64_t rtt_samples = 0;
    double wc_segments = 0;
    double rtt_ms = 0;
    // The loss figures: a flow that ends changes the window as a sample does.
    uint64_t flows = 0;
    uint64_t loss_events = 0;
    bool operator==(const Signature&) const = default;
  };
  static Signature signature_of(const v1::Estimate& est) {
    return {est.samples(), est.rtt_samples(), est.wc_segments(),
            est.rtt_ms(),  est.flows(),       est.loss_events_fast() + est.loss_events_timeout()};
  }
  void run();
  void refresh();
  void push(Subscription& sub, Event ev);

  EstimatesCore& core_;
  uint32_t refresh_interval_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool refresh_requested_ = false;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Subscription>> subs_;
  std::unordered_map<Prefix, Signature, PrefixHash> last_;  // per subscribed prefix
  std::atomic<size_t> subscribers_{0};
  std::atomic<uint64_t> events_pushed_{0};
  std::thread thread_;
};

}  // namespace spand
