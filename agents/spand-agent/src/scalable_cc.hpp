// Scalable TCP as a BPF congestion control (bpf/spand_scalable.bpf.c, embedded as a libbpf
// skeleton): registered under the name "spand_scalable" while the agent runs, so the per-prefix
// policy (policy.high_bdp_cc) can select it, and unregistered when the agent stops.
//
// Registration is global to the host (every network namespace sees the same list), so one
// agent owns it: the owner holds an flock on kScalableLockPath. A second agent finds the lock
// held and uses the owner's registration without owning it. An owner killed without cleanup
// (SIGKILL) leaves the registration behind (the kernel keeps a registered struct_ops map);
// the next owner finds the lock free and the name taken, and removes that leftover first.
#pragma once

#include <memory>
#include <string>

#include "config.hpp"

struct bpf_link;
struct spand_scalable_bpf;

namespace spand::agent {

inline constexpr const char* kScalableCcName = "spand_scalable";
inline constexpr const char* kScalableLockPath = "/run/spand-agent-scalable.lock";

// Whether the configuration asks for it: agent.scalable, or policy.high_bdp_cc naming it.
bool wants_scalable(const AgentConfig& cfg);

// Whether `name` is in /proc/sys/net/ipv4/tcp_available_congestion_control.
bool congestion_control_available(const std::string& name);

class ScalableCc {
 public:
  explicit ScalableCc(std::string lock_path = kScalableLockPath);
  ~ScalableCc();  // stop()
  ScalableCc(const ScalableCc&) = delete;
  ScalableCc& operator=(const ScalableCc&) = delete;

  // Registers it (or finds it registered by another running agent). Each step worth knowing
  // (a leftover removed, another owner) is appended to `log`, one line each. false: `err`.
  bool start(std::string& log, std::string& err);
  // Unregisters it if this instance registered it. Returns what it did ("" if nothing).
  std::string stop();

  bool owned() const { return link_ != nullptr; }

 private:
  // Unregisters every struct_ops map named spand_scalable (a leftover). Returns how many.
  int remove_leftovers(std::string& log, std::string& err);

  std::string lock_path_;
  int lock_fd_ = -1;
  spand_scalable_bpf* skel_ = nullptr;
  bpf_link* link_ = nullptr;
};

}  // namespace spand::agent
