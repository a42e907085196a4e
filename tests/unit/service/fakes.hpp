// Test doubles for the estimate service: an in-memory EstimateStore that counts round trips
// and can be told to fail, a settable clock, and a sample sink that keeps what it gets.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "estimates/store.hpp"
#include "service/estimates_core.hpp"

namespace spand::test {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t ns = 0) : ns_(ns) {}
  uint64_t now_ns() const override { return ns_.load(); }
  void set(uint64_t ns) { ns_ = ns; }
  void advance_ms(uint64_t ms) { ns_ += ms * 1'000'000; }

 private:
  std::atomic<uint64_t> ns_;
};

class FakeStore final : public EstimateStore {
 public:
  bool write(const std::vector<BucketUpdate>& updates, std::string&) override {
    std::lock_guard lock(mu_);
    for (const BucketUpdate& u : updates) windows_[u.prefix].merge(u.acc);
    return true;
  }
  bool read_window(const Prefix& p, uint64_t now_ns, Accumulator& out,
                   std::string& error) override {
    std::lock_guard lock(mu_);
    ++reads_;
    last_now_ns_ = now_ns;
    if (fail_) {
      error = "connection refused";
      return false;
    }
    const auto it = windows_.find(p);
    out = it == windows_.end() ? Accumulator{} : it->second;
    return true;
  }
  bool top_prefixes(uint64_t, size_t limit, std::vector<PrefixActivity>& out,
                    std::string& error) override {
    std::lock_guard lock(mu_);
    if (fail_) {
      error = "connection refused";
      return false;
    }
    out = top_;
    if (out.size() > limit) out.resize(limit);
    return true;
  }

  void set(const Prefix& p, const Accumulator& acc) {
    std::lock_guard lock(mu_);
    windows_[p] = acc;
  }
  void set_fail(bool f) { fail_ = f; }
  void set_top(std::vector<PrefixActivity> rows) { top_ = std::move(rows); }
  uint64_t reads() const { return reads_.load(); }
  uint64_t last_now_ns() const { return last_now_ns_.load(); }

 private:
  std::mutex mu_;
  std::unordered_map<Prefix, Accumulator, PrefixHash> windows_;
  std::vector<PrefixActivity> top_;
  std::atomic<bool> fail_{false};
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> last_now_ns_{0};
};

class FakeSink final : public SampleSink {
 public:
  void submit(const Sample& s) override {
    std::lock_guard lock(mu_);
    samples.push_back(s);
  }
  std::mutex mu_;
  std::vector<Sample> samples;
};

// An AsyncWindowReader over a FakeStore that answers on a thread of its own, as StorePool's
// reader threads do: counts the read_async calls and the reads, and can fail reads of one prefix.
class FakeAsyncReader final : public AsyncWindowReader {
 public:
  explicit FakeAsyncReader(FakeStore& store) : store_(store), thread_([this] { run(); }) {}
  ~FakeAsyncReader() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void read_async(WindowReadOp* const* ops, size_t n) override {
    std::lock_guard lock(mu_);
    ++calls_;
    queue_.insert(queue_.end(), ops, ops + n);
    cv_.notify_all();
  }
  void fail_prefix(const Prefix& p) {
    std::lock_guard lock(mu_);
    fail_ = p;
    failing_ = true;
  }
  uint64_t calls() const { return calls_.load(); }
  uint64_t completed_off_thread() const { return off_thread_.load(); }
  std::thread::id thread_id() const { return thread_.get_id(); }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      WindowReadOp* op = queue_.front();
      queue_.pop_front();
      const bool fail = failing_ && op->prefix == fail_;
      lock.unlock();
      if (fail) {
        op->ok = false;
        op->error = "injected failure";
      } else {
        op->ok = store_.read_window(op->prefix, op->now_ns, op->acc, op->error);
      }
      ++off_thread_;
      op->complete();
      lock.lock();
    }
  }

  FakeStore& store_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WindowReadOp*> queue_;
  bool stop_ = false;
  bool failing_ = false;
  Prefix fail_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> off_thread_{0};
  std::thread thread_;
};

}  // namespace spand::test
