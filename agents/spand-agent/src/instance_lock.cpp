#include "instance_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace spand::agent {

int flock_holder(ino_t ino) {
  // "1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, kind, advisory, mode, dev_ino;
    int pid = 0;
    if (!(f >> id >> kind >> advisory >> mode >> pid >> dev_ino) || kind != "FLOCK") continue;
    const size_t colon = dev_ino.rfind(':');
    if (colon != std::string::npos && dev_ino.substr(colon + 1) == std::to_string(ino)) return pid;
  }
  return 0;
}

PaceDeviceLock::~PaceDeviceLock() {
  if (fd_ >= 0) close(fd_);
}

PaceDeviceLock::Result PaceDeviceLock::acquire(int ifindex, std::string& error, int& holder_pid,
                                               const std::string& lock_dir) {
  holder_pid = 0;
  struct stat ns {};
  if (stat("/proc/self/ns/net", &ns) != 0) {
    error = std::string("cannot read /proc/self/ns/net: ") + std::strerror(errno);
    return Result::kError;
  }
  if (mkdir(lock_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    error = "cannot create " + lock_dir + ": " + std::strerror(errno);
    return Result::kError;
  }
  const std::string path =
      lock_dir + "/pace-" + std::to_string(ns.st_ino) + "-" + std::to_string(ifindex) + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return Result::kError;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    struct stat held {};
    if (err == EWOULDBLOCK && fstat(fd, &held) == 0) holder_pid = flock_holder(held.st_ino);
    close(fd);
    if (err == EWOULDBLOCK) return Result::kBusy;
    error = "cannot lock " + path + ": " + std::strerror(err);
    return Result::kError;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  return Result::kLocked;
}

}  // namespace spand::agent
