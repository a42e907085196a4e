// Exclusive flocks that keep two agents off one shared resource: the pin directory (PinDirLock,
// bpf_applier.hpp) and each pacing device (PaceDeviceLock). An flock goes with the process, also
// on SIGKILL, so a crashed agent never blocks the next one.
#pragma once

#include <sys/types.h>

#include <string>

namespace spand::agent {

// The pid holding an flock on inode `ino` according to /proc/locks, 0 when not found.
int flock_holder(ino_t ino);

// Where the per-device lock files live (tmpfs: emptied at boot; the files are never removed, as
// removing a lock file lets a third process lock a new file of the same name).
inline constexpr const char* kPaceLockDir = "/run/spand";

// One agent per pacing device: an exclusive flock on lock_dir/pace-<netns>-<ifindex>.lock, the
// device named by its network namespace's inode and its ifindex (a device name can be reused
// after a rename, an ifindex is per namespace and /run is not). Two agents on different pin
// directories would otherwise both install, replace and at exit delete the same HTB root qdisc.
class PaceDeviceLock {
 public:
  enum class Result { kLocked, kBusy, kError };
  PaceDeviceLock() = default;
  ~PaceDeviceLock();
  PaceDeviceLock(PaceDeviceLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  PaceDeviceLock& operator=(PaceDeviceLock&&) = delete;
  PaceDeviceLock(const PaceDeviceLock&) = delete;
  PaceDeviceLock& operator=(const PaceDeviceLock&) = delete;

  // kBusy with `holder_pid` (0 if unknown) when another process holds the device; kError with
  // `error` when the lock file cannot be made.
  Result acquire(int ifindex, std::string& error, int& holder_pid,
                 const std::string& lock_dir = kPaceLockDir);

 private:
  int fd_ = -1;
};

}  // namespace spand::agent
