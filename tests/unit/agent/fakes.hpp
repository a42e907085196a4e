// Fakes for AgentCore: a scripted estimate source, a recording kernel applier, a manual clock.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent_core.hpp"

namespace spand::agent::test {

class FakeClock : public Clock {
 public:
  double t = 1000;
  double now_s() override { return t; }
};

class FakeSource : public EstimateSource {
 public:
  std::map<Prefix, Estimate> estimates;
  bool down = false;
  int gets = 0;
  std::vector<Estimate> pushes;
  std::vector<Prefix> watched;
  FetchResult get(const Prefix& p) override {
    ++gets;
    if (down) return {FetchStatus::kUnavailable, std::nullopt};
    auto it = estimates.find(p);
    if (it == estimates.end()) return {FetchStatus::kNotFound, std::nullopt};
    return {FetchStatus::kOk, it->second};
  }
  void watch(const std::vector<Prefix>& p) override { watched = p; }
  std::vector<Estimate> take_updates() override {
    std::vector<Estimate> out;
    out.swap(pushes);
    return out;
  }
};

class FakeApplier : public KernelApplier {
 public:
  bool ports = true;
  bool fail = false;
  std::map<PolicyKey, KernelPolicy> kernel;
  int upserts = 0, removes = 0;
  bool stopped = false;
  const char* name() const override { return "fake"; }
  bool per_port() const override { return ports; }
  bool start(std::string&) override { return true; }
  bool upsert(const KernelPolicy& p, std::string& e) override {
    if (fail) {
      e = "injected";
      return false;
    }
    ++upserts;
    kernel[p.key] = p;
    return true;
  }
  int renews = 0;
  bool renew(const KernelPolicy& p, std::string& e) override {
    if (fail) {
      e = "injected";
      return false;
    }
    ++renews;
    kernel[p.key] = p;
    return true;
  }
  bool remove(const PolicyKey& k, std::string&) override {
    ++removes;
    kernel.erase(k);
    return true;
  }
  void stop() override { stopped = true; }
  bool active() const override { return true; }
};

inline Prefix P(const char* s) {
  return *Prefix::parse(s);
}

inline Estimate E(const char* prefix, double wc, double rtt_ms = 20, uint64_t samples = 50,
                  Verdict v = Verdict::kUseEstimate, double age_s = 0) {
  Estimate e;
  e.prefix = P(prefix);
  e.wc_segments = wc;
  e.rtt_ms = rtt_ms;
  e.samples = samples;
  e.verdict = v;
  e.age_s = age_s;
  return e;
}

}  // namespace spand::agent::test
