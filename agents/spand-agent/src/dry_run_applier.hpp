// --dry-run: prints what would be applied and changes nothing in the kernel.
#pragma once

#include <algorithm>
#include <cstdio>

#include "applier.hpp"

namespace spand::agent {

class DryRunApplier : public KernelApplier {
 public:
  DryRunApplier(const char* would_be_mode, bool per_port, std::FILE* out = stdout)
      : mode_(would_be_mode), per_port_(per_port), out_(out) {}
  const char* name() const override { return "dry-run"; }
  bool per_port() const override { return per_port_; }
  bool start(std::string&) override {
    std::fprintf(out_, "dry-run: would use %s mode; nothing is changed\n", mode_);
    std::fflush(out_);
    return true;
  }
  bool upsert(const KernelPolicy& p, std::string&) override {
    std::fprintf(out_, "dry-run: apply %s srtt_us=%u syn_rto_ms=%u cc=%s cwnd=%u%s\n",
                 describe(p).c_str(), p.srtt_us, p.syn_rto_ms,
                 p.congestion_control.empty() ? "default" : p.congestion_control.c_str(),
                 std::max(p.init_cwnd_segments, p.pacing_cwnd_segments),
                 p.capped ? " (capped)" : "");
    std::fflush(out_);
    return true;
  }
  bool remove(const PolicyKey& k, std::string&) override {
    std::fprintf(out_, "dry-run: remove port=%u prefix=%s\n", k.port, k.prefix.str().c_str());
    std::fflush(out_);
    return true;
  }
  void stop() override {}
  bool active() const override { return false; }

 private:
  const char* mode_;
  bool per_port_;
  std::FILE* out_;
};

}  // namespace spand::agent
