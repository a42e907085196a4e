// The HTB classes that pace a socket's whole first window (agent.pace_devices): Linux's TCP
// pacing skips the first 10 segments and this kernel has no fq or etf qdisc to honour departure
// times, so the first window is shaped by a token bucket per class instead. On each device:
// an HTB root qdisc with handle SPAND_HTB_MAJOR: and no default class (unclassified traffic goes
// through HTB's direct queue, unshaped), and one leaf class per pacing-rate bin and copy (rate =
// ceil = the bin's rate, burst and cburst SPAND_PACE_BURST_FRAMES frames of the device's MTU).
// The sock_ops program selects a class through the socket's priority (libspand/spand_maps.h).
//
// A device whose root qdisc was set up by someone else (a nonzero handle that is not ours) is
// refused rather than replaced. One agent per device: each device is locked first
// (PaceDeviceLock, instance_lock.hpp), and a device another agent holds is refused (busy()), so
// our own root qdisc found there is an earlier instance's (killed before it could clean up) and
// is replaced. stop() deletes the root qdisc, which gives the device its default qdisc back, and
// releases the locks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "instance_lock.hpp"
#include "rtnl.hpp"

namespace spand::agent {

class PacingQdiscs {
 public:
  explicit PacingQdiscs(std::vector<std::string> devices);
  ~PacingQdiscs();
  PacingQdiscs(const PacingQdiscs&) = delete;
  PacingQdiscs& operator=(const PacingQdiscs&) = delete;

  // Installs the qdisc and its classes on every device; on an error removes what it installed
  // and says which device and why.
  bool start(std::string& error);
  void stop();
  size_t installed() const { return installed_.size(); }
  // start() failed because another agent holds one of the devices (the error names it).
  bool busy() const { return busy_; }
  static uint32_t classes_per_device();

  // A device's root qdisc, as the qdisc dump shows it.
  struct RootQdisc {
    int ifindex = 0;  // the device asked about
    bool found = false;
    uint32_t handle = 0;
    std::string kind;
  };

 private:
  bool install(const std::string& dev, std::string& error);
  bool root_qdisc(int ifindex, RootQdisc& out, std::string& error);
  bool remove_root(int ifindex, std::string& error);

  std::vector<std::string> devices_;
  std::vector<int> installed_;  // ifindexes with our root qdisc
  std::vector<PaceDeviceLock> locks_;
  bool busy_ = false;
  Rtnl rtnl_;
};

}  // namespace spand::agent
