// Logs each kernel change on stderr, the record of what the agent did.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>

#include "applier.hpp"

namespace spand::agent {

class LoggingApplier : public KernelApplier {
 public:
  explicit LoggingApplier(KernelApplier& inner) : inner_(inner) {}
  const char* name() const override { return inner_.name(); }
  bool per_port() const override { return inner_.per_port(); }
  bool start(std::string& e) override { return inner_.start(e); }
  bool upsert(const KernelPolicy& p, std::string& e) override {
    bool ok = inner_.upsert(p, e);
    if (ok)
      std::fprintf(stderr, "spand-agent: applied %s syn_rto_ms=%u cwnd=%u%s\n", describe(p).c_str(),
                   p.syn_rto_ms, std::max(p.init_cwnd_segments, p.pacing_cwnd_segments),
                   p.capped ? " (capped)" : "");
    return ok;
  }
  // A deadline moved on: the policy itself is what was logged.
  bool renew(const KernelPolicy& p, std::string& e) override { return inner_.renew(p, e); }
  bool remove(const PolicyKey& k, std::string& e) override {
    bool ok = inner_.remove(k, e);
    if (ok)
      std::fprintf(stderr, "spand-agent: removed port=%u prefix=%s\n", k.port,
                   k.prefix.str().c_str());
    return ok;
  }
  void stop() override { inner_.stop(); }
  bool active() const override { return inner_.active(); }

 private:
  KernelApplier& inner_;
};

}  // namespace spand::agent
