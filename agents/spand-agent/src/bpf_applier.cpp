#include "bpf_applier.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "instance_lock.hpp"
#include "spand_maps.h"
#include "spand_sockops.skel.h"

namespace spand::agent {

namespace {

constexpr long kBpfFsMagic = 0xcafe4a11;

bool ensure_bpffs(std::string& error) {
  struct statfs st {};
  if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == kBpfFsMagic) return true;
  mkdir("/sys/fs/bpf", 0755);
  if (mount("bpf", "/sys/fs/bpf", "bpf", 0, nullptr) != 0) {
    error = std::string("cannot mount bpffs on /sys/fs/bpf: ") + std::strerror(errno);
    return false;
  }
  return true;
}

spand_prefix_key make_key(const PolicyKey& k) {
  spand_prefix_key key{};
  key.prefixlen = SPAND_KEY_PORT_BITS + k.prefix.mapped_len_bits();
  key.data[0] = static_cast<uint8_t>(k.port >> 8);
  key.data[1] = static_cast<uint8_t>(k.port & 0xff);
  std::memcpy(&key.data[2], k.prefix.addr.data(), 16);
  return key;
}

}  // namespace

int cleanup_stale_bpf(const std::string& pin_dir) {
  int removed = 0;
  const std::string link = pin_dir + "/" SPAND_PIN_NAME_LINK;
  int fd = bpf_obj_get(link.c_str());
  if (fd >= 0) {
    // Detach explicitly: other holders of the link (none expected) must not keep it alive.
    bpf_link_detach(fd);
    close(fd);
  }
  for (const char* name : {SPAND_PIN_NAME_LINK, SPAND_PIN_NAME_PREFIX_MAP, SPAND_PIN_NAME_TUNE_MAP,
                           SPAND_PIN_NAME_STATS_MAP, SPAND_PIN_NAME_TUNE_PORTS_MAP}) {
    if (unlink((pin_dir + "/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

PinDirLock::~PinDirLock() {
  if (fd_ >= 0) close(fd_);
}

PinDirLock::Result PinDirLock::acquire(const std::string& pin_dir, std::string& error,
                                       int& holder_pid) {
  holder_pid = 0;
  if (!ensure_bpffs(error)) return Result::kError;
  // The previous holder may remove the directory (its exit) between our open and our lock:
  // the lock is good only on the directory that is still at the path.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (mkdir(pin_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      error = "cannot create " + pin_dir + ": " + std::strerror(errno);
      return Result::kError;
    }
    struct statfs fs {};
    if (statfs(pin_dir.c_str(), &fs) != 0 || fs.f_type != kBpfFsMagic) {
      error = pin_dir + " is not on a bpffs (pin directories belong under /sys/fs/bpf)";
      return Result::kError;
    }
    int fd = open(pin_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      error = "cannot open " + pin_dir + ": " + std::strerror(errno);
      return Result::kError;
    }
    struct stat held {
    }, at_path{};
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (fstat(fd, &held) == 0 && err == EWOULDBLOCK) holder_pid = flock_holder(held.st_ino);
      close(fd);
      if (err == EWOULDBLOCK) return Result::kBusy;
      error = "cannot lock " + pin_dir + ": " + std::strerror(err);
      return Result::kError;
    }
    if (fstat(fd, &held) == 0 && stat(pin_dir.c_str(), &at_path) == 0 &&
        held.st_ino == at_path.st_ino && held.st_dev == at_path.st_dev) {
      if (fd_ >= 0) close(fd_);
      fd_ = fd;
      return Result::kLocked;
    }
    close(fd);
  }
  error = "cannot lock " + pin_dir + ": it keeps being removed and created";
  return Result::kError;
}

BpfApplier::BpfApplier(std::string cgroup_path, uint32_t kernel_hz,
                       std::vector<uint16_t> tune_ports, bool tune_outgoing, bool pace_htb,
                       std::string pin_dir)
    : cgroup_path_(std::move(cgroup_path)),
      pin_dir_(std::move(pin_dir)),
      kernel_hz_(kernel_hz),
      tune_ports_(std::move(tune_ports)),
      tune_outgoing_(tune_outgoing),
      pace_htb_(pace_htb) {}

BpfApplier::~BpfApplier() {
  stop();
}

bool BpfApplier::start(std::string& error) {
  if (!ensure_bpffs(error)) return false;
  mkdir(pin_dir_.c_str(), 0755);
  cleanup_stale_bpf(pin_dir_);

  skel_ = spand_sockops_bpf__open();
  if (!skel_) {
    error = std::string("cannot open the BPF object: ") + std::strerror(errno);
    return false;
  }
  skel_->rodata->spand_tune_outgoing = tune_outgoing_ ? 1 : 0;
  skel_->rodata->spand_have_tune_ports = tune_ports_.empty() ? 0 : 1;
  skel_->rodata->spand_pace_htb = pace_htb_ ? 1 : 0;
  skel_->rodata->spand_v4_prefix_len = networks_.v4_len;
  skel_->rodata->spand_v6_prefix_len = networks_.v6_len;
  skel_->rodata->spand_measure_trains = measure_trains_ ? 1 : 0;
  if (int err = spand_sockops_bpf__load(skel_); err) {
    error = std::string("cannot load the sock_ops program: ") + std::strerror(-err);
    spand_sockops_bpf__destroy(skel_);
    skel_ = nullptr;
    return false;
  }
  int cg = open(cgroup_path_.c_str(), O_RDONLY | O_DIRECTORY);
  if (cg < 0) {
    error = "cannot open cgroup " + cgroup_path_ + ": " + std::strerror(errno);
    stop();
    return false;
  }
  link_ = bpf_program__attach_cgroup(skel_->progs.spand_sockops, cg);
  close(cg);
  if (!link_) {
    error = "cannot attach sock_ops to " + cgroup_path_ + ": " + std::strerror(errno);
    stop();
    return false;
  }
  attached_ = true;
  // Pinned so that a restarted agent (even after SIGKILL) finds and replaces this instance,
  // and so that spand_tune can open the tune map.
  if (bpf_link__pin(link_, pin(SPAND_PIN_NAME_LINK).c_str()) ||
      bpf_map__pin(skel_->maps.prefix_policy, pin(SPAND_PIN_NAME_PREFIX_MAP).c_str()) ||
      bpf_map__pin(skel_->maps.sock_tune, pin(SPAND_PIN_NAME_TUNE_MAP).c_str()) ||
      bpf_map__pin(skel_->maps.stats, pin(SPAND_PIN_NAME_STATS_MAP).c_str()) ||
      bpf_map__pin(skel_->maps.tune_ports, pin(SPAND_PIN_NAME_TUNE_PORTS_MAP).c_str())) {
    error = "cannot pin under " + pin_dir_ + ": " + std::strerror(errno);
    stop();
    return false;
  }
  uint8_t one = 1;
  for (uint16_t port : tune_ports_) {
    if (bpf_map__update_elem(skel_->maps.tune_ports, &port, sizeof(port), &one, sizeof(one),
                             BPF_ANY)) {
      error = std::string("cannot fill tune_ports: ") + std::strerror(errno);
      stop();
      return false;
    }
  }
  return true;
}

bool BpfApplier::upsert(const KernelPolicy& p, std::string& error) {
  if (!skel_) {
    error = "not started";
    return false;
  }
  spand_prefix_key key = make_key(p.key);
  spand_policy val{};
  val.init_cwnd_segments = p.init_cwnd_segments;
  if (p.skip_slow_start) val.flags |= SPAND_POLICY_SKIP_SS;
  if (p.ca_emulate) val.flags |= SPAND_POLICY_CA_EMULATE;
  if (p.share_concurrent) val.flags |= SPAND_POLICY_SHARE;
  if (p.share_rate_only) val.flags |= SPAND_POLICY_SHARE_RATE;  // set with share_concurrent only
  if (p.pace_only_queued) val.flags |= SPAND_POLICY_PACE_QUEUED;
  if (p.pace_by_rank) val.flags |= SPAND_POLICY_PACE_RANK;  // set with pace_only_queued only
  val.min_cwnd_segments = p.min_cwnd_segments;
  val.ssthresh_segments = p.ssthresh_segments;
  val.pacing_cwnd_segments = p.pacing_cwnd_segments;
  val.queue_room_us = p.queue_room_us;
  val.prop_rtt_us = p.prop_rtt_us;
  val.path_rate_bytes_per_s = p.path_rate_bytes_per_s;
  val.min_gain_segments = p.min_gain_segments;
  val.floor_burst_segments = p.floor_burst_segments;
  networks_.mark(p.key.prefix, val);
  if (!p.congestion_control.empty()) {
    val.flags |= SPAND_POLICY_SET_CC;
    std::strncpy(val.cc_name, p.congestion_control.c_str(), sizeof(val.cc_name) - 1);
  }
  val.pacing_rate_bytes_per_s = p.pacing_rate_bytes_per_s;
  val.syn_rto_jiffies =
      p.syn_rto_ms ? static_cast<uint32_t>((uint64_t{p.syn_rto_ms} * kernel_hz_ + 999) / 1000) : 0;
  val.wc_segments = p.wc_segments;
  val.srtt_us = p.srtt_us;
  val.acked_per_ack = p.acked_per_ack;
  // The core's clock is CLOCK_MONOTONIC (SteadyClock), as bpf_ktime_get_ns() is.
  if (p.expires_s > 0) val.expires_ns = std::max<uint64_t>(1, uint64_t(p.expires_s * 1e9));
  // The count goes up before the entry exists, so the program never skips a port-0 policy.
  if (p.key.port == 0 && any_port_keys_.insert(p.key).second)
    skel_->bss->spand_any_port_policies = static_cast<uint32_t>(any_port_keys_.size());
  if (bpf_map__update_elem(skel_->maps.prefix_policy, &key, sizeof(key), &val, sizeof(val),
                           BPF_ANY)) {
    error = std::string("prefix map update: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool BpfApplier::remove(const PolicyKey& k, std::string& error) {
  if (!skel_) return true;
  spand_prefix_key key = make_key(k);
  if (bpf_map__delete_elem(skel_->maps.prefix_policy, &key, sizeof(key), 0) && errno != ENOENT) {
    error = std::string("prefix map delete: ") + std::strerror(errno);
    return false;
  }
  // ... and down only once it is gone.
  if (k.port == 0 && any_port_keys_.erase(k))
    skel_->bss->spand_any_port_policies = static_cast<uint32_t>(any_port_keys_.size());
  return true;
}

void BpfApplier::stop() {
  if (link_) {
    bpf_link__unpin(link_);
    bpf_link__destroy(link_);  // detaches from the cgroup
    link_ = nullptr;
  }
  attached_ = false;
  if (skel_) {
    bpf_map__unpin(skel_->maps.prefix_policy, pin(SPAND_PIN_NAME_PREFIX_MAP).c_str());
    bpf_map__unpin(skel_->maps.sock_tune, pin(SPAND_PIN_NAME_TUNE_MAP).c_str());
    bpf_map__unpin(skel_->maps.stats, pin(SPAND_PIN_NAME_STATS_MAP).c_str());
    bpf_map__unpin(skel_->maps.tune_ports, pin(SPAND_PIN_NAME_TUNE_PORTS_MAP).c_str());
    spand_sockops_bpf__destroy(skel_);
    skel_ = nullptr;
  }
  rmdir(pin_dir_.c_str());
}

std::vector<BpfApplier::TrainReading> BpfApplier::take_train_rates() {
  std::vector<TrainReading> out;
  if (!skel_) return out;
  const int fd = bpf_map__fd(skel_->maps.prefix_rate);
  spand_active_key key{};
  spand_active_key next{};
  std::vector<spand_active_key> keys;
  const void* prev = nullptr;
  while (keys.size() < SPAND_MAX_PREFIXES && bpf_map_get_next_key(fd, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  for (const spand_active_key& k : keys) {
    spand_rate_reading r{};
    if (bpf_map_lookup_and_delete_elem(fd, &k, &r) != 0 &&
        (bpf_map_lookup_elem(fd, &k, &r) != 0 || bpf_map_delete_elem(fd, &k) != 0))
      continue;
    out.push_back({ProgramNetworks::of_key(k), r.rate_bytes_per_s, r.paced_rate_bytes_per_s});
  }
  return out;
}

std::vector<uint64_t> BpfApplier::program_stats() const {
  std::vector<uint64_t> out(SPAND_STAT_COUNT, 0);
  if (!skel_) return out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  for (uint32_t i = 0; i < SPAND_STAT_COUNT; ++i) {
    if (bpf_map__lookup_elem(skel_->maps.stats, &i, sizeof(i), per_cpu.data(),
                             per_cpu.size() * sizeof(uint64_t), 0) == 0)
      for (uint64_t v : per_cpu) out[i] += v;
  }
  return out;
}

}  // namespace spand::agent
