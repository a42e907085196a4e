#include "scalable_cc.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "spand_scalable.skel.h"

namespace spand::agent {

bool wants_scalable(const AgentConfig& cfg) {
  return cfg.scalable || cfg.policy.high_bdp_cc == kScalableCcName;
}

bool congestion_control_available(const std::string& name) {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::string s;
  while (in >> s)
    if (s == name) return true;
  return false;
}

namespace {

std::string errno_text(int e) {
  return std::string(std::strerror(e));
}

// The pid written into the lock file by its holder ("?" if unreadable).
std::string lock_holder(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "?";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "?" : s;
}

}  // namespace

ScalableCc::ScalableCc(std::string lock_path) : lock_path_(std::move(lock_path)) {}

ScalableCc::~ScalableCc() {
  stop();
}

int ScalableCc::remove_leftovers(std::string& log, std::string& err) {
  int removed = 0;
  __u32 id = 0;
  while (bpf_map_get_next_id(id, &id) == 0) {
    int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;  // gone meanwhile
    bpf_map_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_STRUCT_OPS &&
        std::strncmp(info.name, kScalableCcName, sizeof(info.name)) == 0) {
      __u32 key = 0;
      // What `bpftool struct_ops unregister` does: the kernel unregisters the ops on delete.
      if (bpf_map_delete_elem(fd, &key) == 0) {
        ++removed;
        log += "removed a leftover registration of " + std::string(kScalableCcName) +
               " (struct_ops map id " + std::to_string(id) +
               ", left by an agent that did not exit cleanly)\n";
      } else if (errno != ENOENT && errno != EINVAL) {
        err = "cannot remove the leftover " + std::string(kScalableCcName) +
              " (struct_ops map id " + std::to_string(id) + "): " + errno_text(errno);
        close(fd);
        return -1;
      }
    }
    close(fd);
  }
  return removed;
}

bool ScalableCc::start(std::string& log, std::string& err) {
  lock_fd_ = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    err = lock_path_ + ": " + errno_text(errno);
    return false;
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    const std::string holder = lock_holder(lock_fd_);
    close(lock_fd_);
    lock_fd_ = -1;
    if (e != EWOULDBLOCK) {
      err = lock_path_ + ": flock: " + errno_text(e);
      return false;
    }
    if (!congestion_control_available(kScalableCcName)) {
      err = "another spand-agent (pid " + holder + ") holds " + lock_path_ + " but " +
            kScalableCcName + " is not registered; stop that agent or try again";
      return false;
    }
    log += std::string(kScalableCcName) + " is registered by another spand-agent (pid " + holder +
           "): selecting it without owning it; it goes away when that agent stops\n";
    return true;
  }
  // The owner: its pid in the lock file, for a second agent's message.
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock_fd_, 0) != 0 || pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // Only the message of a second agent suffers.
  }

  if (congestion_control_available(kScalableCcName)) {
    if (remove_leftovers(log, err) < 0) return false;
    if (congestion_control_available(kScalableCcName)) {
      err = std::string("a congestion control named ") + kScalableCcName +
            " is registered and is not spand-agent's (no struct_ops map of that name could be "
            "removed); unregister it first (bpftool struct_ops show)";
      return false;
    }
  }

  skel_ = spand_scalable_bpf__open_and_load();
  if (!skel_) {
    err = std::string("loading ") + kScalableCcName + ": " + errno_text(errno) +
          " (needs CAP_BPF and CAP_NET_ADMIN, and kernel BTF: /sys/kernel/btf/vmlinux)";
    return false;
  }
  link_ = bpf_map__attach_struct_ops(skel_->maps.spand_scalable);
  if (!link_) {
    const int e = errno;
    spand_scalable_bpf__destroy(skel_);
    skel_ = nullptr;
    err = std::string("registering ") + kScalableCcName + ": " + errno_text(e) +
          (e == EEXIST ? " (the name was registered meanwhile)" : "");
    return false;
  }
  if (!congestion_control_available(kScalableCcName)) {
    stop();
    err = std::string(kScalableCcName) +
          " registered but missing from net.ipv4.tcp_available_congestion_control";
    return false;
  }
  return true;
}

std::string ScalableCc::stop() {
  std::string what;
  if (link_) {
    // libbpf 1.1 registers without a BPF link: destroying its link object deletes the map's
    // element, which unregisters the congestion control. Sockets using it keep it until they
    // close (the kernel holds a reference per socket).
    bpf_link__destroy(link_);
    link_ = nullptr;
    what = std::string("unregistered ") + kScalableCcName;
    if (congestion_control_available(kScalableCcName)) what += " (still listed: check bpftool)";
  }
  if (skel_) {
    spand_scalable_bpf__destroy(skel_);
    skel_ = nullptr;
  }
  if (lock_fd_ >= 0) {
    close(lock_fd_);  // releases the flock
    lock_fd_ = -1;
  }
  return what;
}

}  // namespace spand::agent
