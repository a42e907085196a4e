// BPF mode: the sock_ops program (bpf/spand_sockops.bpf.c) attached to a cgroup v2 through a
// pinned bpf_link, and its LPM map kept current. One agent per pin directory (PinDirLock); a
// restart finds the pinned link of a previous instance and detaches it first, so there is
// never more than one spand program per pin directory.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "applier.hpp"
#include "program_networks.hpp"
#include "spand_maps.h"

struct spand_sockops_bpf;
struct bpf_link;

namespace spand::agent {

class BpfApplier : public KernelApplier {
 public:
  // `pin_dir`: where the link and maps are pinned (held with a PinDirLock by the caller).
  BpfApplier(std::string cgroup_path, uint32_t kernel_hz, std::vector<uint16_t> tune_ports,
             bool tune_outgoing, bool pace_htb = false, std::string pin_dir = SPAND_PIN_DIR);
  ~BpfApplier() override;
  const char* name() const override { return "bpf"; }
  bool per_port() const override { return true; }
  bool start(std::string& error) override;
  bool upsert(const KernelPolicy& policy, std::string& error) override;
  bool remove(const PolicyKey& key, std::string& error) override;
  bool renew(const KernelPolicy& policy, std::string& error) override {
    return upsert(policy, error);
  }
  void stop() override;
  bool active() const override { return attached_; }

  // The client network size for counting first windows in flight (before start()).
  void set_prefix_lens(uint32_t v4, uint32_t v6) {
    networks_.v4_len = v4;
    networks_.v6_len = v6;
  }
  // A prefix map is in use: the program counts a policy's sockets under the policy's prefix
  // (program_networks.hpp; before start()).
  void set_per_policy_networks(bool on) { networks_.per_policy = on; }
  // Time first-flight ACK trains of every connection (before start()).
  void set_measure_trains(bool on) { measure_trains_ = on; }
  // Takes the program's ACK-train rate readings (prefix_rate): each client network (the fixed
  // one, or a policy's longer prefix) with the largest rate since the last call, in bytes per
  // second (0: none), and the largest rate of a flight spand paced that read its own pacing (a
  // lower bound of the path's rate, 0: none).
  struct TrainReading {
    Prefix prefix;
    uint64_t rate_bytes_per_s = 0;
    uint64_t paced_rate_bytes_per_s = 0;
  };
  std::vector<TrainReading> take_train_rates();
  // Per-CPU counters of the program summed (SPAND_STAT_*), for logs and metrics.
  std::vector<uint64_t> program_stats() const;

 private:
  std::string pin(const char* name) const { return pin_dir_ + "/" + name; }

  std::string cgroup_path_;
  std::string pin_dir_;
  uint32_t kernel_hz_;
  std::vector<uint16_t> tune_ports_;
  bool tune_outgoing_;
  bool pace_htb_;  // pacing classes installed (PacingQdiscs): the program selects them
  bool measure_trains_ = false;
  ProgramNetworks networks_;
  std::set<PolicyKey> any_port_keys_;  // port-0 policies in the map (the program's fallback)
  spand_sockops_bpf* skel_ = nullptr;
  ::bpf_link* link_ = nullptr;
  bool attached_ = false;
};

// Removes what a previous instance left pinned in `pin_dir` (link and maps) and detaches its
// program. Returns how many pins were removed. Call it only while holding the directory's lock.
int cleanup_stale_bpf(const std::string& pin_dir = SPAND_PIN_DIR);

// One agent per pin directory: an exclusive flock on the directory itself (created on bpffs,
// mounted at /sys/fs/bpf when nothing is). A second agent would otherwise detach the first
// one's program as a leftover and delete its pins at exit. The lock goes with the process,
// SIGKILL included, so a leftover is told from a live agent by the lock alone.
class PinDirLock {
 public:
  enum class Result { kLocked, kBusy, kError };
  PinDirLock() = default;
  PinDirLock(const PinDirLock&) = delete;
  PinDirLock& operator=(const PinDirLock&) = delete;
  ~PinDirLock();
  // kBusy: another process holds it (`holder_pid` from /proc/locks, 0 when not found).
  Result acquire(const std::string& pin_dir, std::string& error, int& holder_pid);
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace spand::agent
