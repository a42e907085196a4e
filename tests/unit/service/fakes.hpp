// Test doubles for the estimate service: an in-memory EstimateStore that counts round trips
// and can be told to fail, a settable clock, and a sample sink that keeps what it gets.
#pragma once

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core.hpp"
#include "estimates/store.hpp"

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

}  // namespace spand::test
