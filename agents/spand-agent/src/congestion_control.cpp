#include "congestion_control.hpp"

#include <cstdio>

#include "exit_codes.hpp"
#include "host_checks.hpp"

namespace spand::agent {

std::optional<int> CongestionControls::start(const AgentConfig& cfg) {
  available_ = available_congestion_controls();
#ifdef SPAND_AGENT_SCALABLE
  if (wants_scalable(cfg) && cfg.dry_run) {
    std::fprintf(stderr, "spand-agent: dry-run: would register congestion control %s\n",
                 kScalableCcName);
    available_.insert(kScalableCcName);
  } else if (wants_scalable(cfg)) {
    scalable_ = std::make_unique<ScalableCc>();
    std::string log, serr;
    bool ok = scalable_->start(log, serr);
    for (size_t a = 0, b; (b = log.find('\n', a)) != std::string::npos; a = b + 1)
      std::fprintf(stderr, "spand-agent: %s\n", log.substr(a, b - a).c_str());
    if (!ok) {
      std::fprintf(stderr, "spand-agent: congestion control %s: %s\n", kScalableCcName,
                   serr.c_str());
      return kExitRuntime;
    }
    if (scalable_->owned())
      std::fprintf(stderr, "spand-agent: registered congestion control %s\n", kScalableCcName);
    available_ = available_congestion_controls();
  }
#else
  if (cfg.scalable) {
    std::fprintf(stderr, "spand-agent: built without Scalable TCP (no kernel BTF at build time)\n");
    return kExitUsage;
  }
#endif
  if (cfg.policy.share_floor_paced && !cfg.policy.share_floor_cc.empty() &&
      !available_.count(cfg.policy.share_floor_cc))
    std::fprintf(stderr,
                 "spand-agent: share_floor_cc %s is not in "
                 "net.ipv4.tcp_available_congestion_control (modprobe tcp_%s?): rule 12 leaves "
                 "the congestion control unchanged\n",
                 cfg.policy.share_floor_cc.c_str(), cfg.policy.share_floor_cc.c_str());
  return std::nullopt;
}

void CongestionControls::stop() {
#ifdef SPAND_AGENT_SCALABLE
  if (scalable_) {
    std::string what = scalable_->stop();
    if (!what.empty()) std::fprintf(stderr, "spand-agent: %s\n", what.c_str());
  }
#endif
}

}  // namespace spand::agent
