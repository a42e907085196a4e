#include "pacing_qdisc.hpp"

#include <libmnl/libmnl.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "spand_maps.h"

namespace spand::agent {

namespace {

constexpr uint32_t kHandle = SPAND_HTB_MAJOR << 16;
constexpr uint32_t kEthernetHeader = 14;

int device_mtu(const std::string& dev) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
  int mtu = ioctl(fd, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : -1;
  close(fd);
  return mtu;
}

tcmsg* put_tcmsg(nlmsghdr* nlh, int ifindex, uint32_t handle, uint32_t parent) {
  auto* tcm = static_cast<tcmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(tcmsg)));
  tcm->tcm_family = AF_UNSPEC;
  tcm->tcm_ifindex = ifindex;
  tcm->tcm_handle = handle;
  tcm->tcm_parent = parent;
  return tcm;
}

int collect_root(const nlmsghdr* nlh, void* data) {
  auto* ctx = static_cast<PacingQdiscs::RootQdisc*>(data);
  auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
  if (tcm->tcm_ifindex != ctx->ifindex || tcm->tcm_parent != TC_H_ROOT) return MNL_CB_OK;
  ctx->found = true;
  ctx->handle = tcm->tcm_handle;
  auto* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(nlh));
  for (auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(nlh, sizeof(*tcm)));
       mnl_attr_ok(attr, static_cast<int>(tail - reinterpret_cast<const char*>(attr)));
       attr = mnl_attr_next(attr)) {
    if (mnl_attr_get_type(attr) == TCA_KIND) ctx->kind = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;
}

// A token bucket's depth in psched ticks (64 ns), as HTB takes it.
uint32_t buffer_ticks(uint64_t bytes, uint64_t rate_bytes_per_s) {
  const uint64_t ns = bytes * 1'000'000'000ull / rate_bytes_per_s;
  const uint64_t ticks = ns >> 6;
  return ticks > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ticks);
}

}  // namespace

PacingQdiscs::PacingQdiscs(std::vector<std::string> devices) : devices_(std::move(devices)) {}

PacingQdiscs::~PacingQdiscs() {
  stop();
}

uint32_t PacingQdiscs::classes_per_device() {
  return SPAND_PACE_BINS * SPAND_PACE_COPIES;
}

bool PacingQdiscs::root_qdisc(int ifindex, RootQdisc& out, std::string& error) {
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_GETQDISC;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  put_tcmsg(nlh, 0, 0, 0);
  out = RootQdisc{ifindex};
  if (!rtnl_.query(nlh, collect_root, &out, error)) {
    error = "qdisc dump: " + error;
    return false;
  }
  return true;
}

bool PacingQdiscs::remove_root(int ifindex, std::string& error) {
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_DELQDISC;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  put_tcmsg(nlh, ifindex, kHandle, TC_H_ROOT);
  return rtnl_.request(nlh, error);
}

bool PacingQdiscs::install(const std::string& dev, std::string& error) {
  const int ifindex = static_cast<int>(if_nametoindex(dev.c_str()));
  const int mtu = device_mtu(dev);
  if (ifindex == 0 || mtu <= 0) {
    error = "pacing device " + dev + ": no such device";
    return false;
  }
  PaceDeviceLock lock;
  int holder = 0;
  switch (lock.acquire(ifindex, error, holder)) {
    case PaceDeviceLock::Result::kLocked:
      locks_.push_back(std::move(lock));
      break;
    case PaceDeviceLock::Result::kBusy:
      busy_ = true;
      error = "pacing device " + dev + ": another spand-agent" +
              (holder ? " (pid " + std::to_string(holder) + ")" : std::string()) +
              " paces it: one agent per pacing device (stop it, or leave " + dev +
              " out of agent.pace_devices / --pace-device)";
      return false;
    case PaceDeviceLock::Result::kError:
      error = "pacing device " + dev + ": " + error;
      return false;
  }
  RootQdisc root;
  if (!root_qdisc(ifindex, root, error)) return false;
  if (root.found && root.handle == kHandle && root.kind == "htb") {
    // Left by an earlier instance (killed before it could clean up): start afresh.
    if (!remove_root(ifindex, error)) {
      error = "pacing device " + dev + ": removing the previous spand qdisc: " + error;
      return false;
    }
  } else if (root.found && root.handle != 0) {
    // Handle 0 is a qdisc the kernel attached by default (noqueue, pfifo_fast, mq); any other
    // was configured by someone, and replacing it would drop their setup.
    char h[16];
    std::snprintf(h, sizeof(h), "%x:", root.handle >> 16);
    error = "pacing device " + dev + " has a configured root qdisc (" + root.kind + " " + h +
            "); not replacing it: remove it, or leave " + dev + " out of agent.pace_devices";
    return false;
  }

  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWQDISC;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
  put_tcmsg(nlh, ifindex, kHandle, TC_H_ROOT);
  mnl_attr_put_strz(nlh, TCA_KIND, "htb");
  nlattr* opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
  tc_htb_glob glob{};
  glob.version = TC_HTB_PROTOVER;
  glob.rate2quantum = 10;
  glob.defcls = 0;  // no default class: unclassified packets take the direct queue
  mnl_attr_put(nlh, TCA_HTB_INIT, sizeof(glob), &glob);
  mnl_attr_nest_end(nlh, opts);
  if (!rtnl_.request(nlh, error)) {
    error = "pacing device " + dev + ": adding the htb qdisc: " + error;
    return false;
  }
  installed_.push_back(ifindex);

  const uint32_t frame = static_cast<uint32_t>(mtu) + kEthernetHeader;
  const uint32_t burst = SPAND_PACE_BURST_FRAMES * frame;
  for (uint32_t bin = 0; bin < SPAND_PACE_BINS; ++bin) {
    const uint64_t rate = spand_pace_bin_rate(bin);
    tc_htb_opt opt{};
    opt.rate.linklayer = TC_LINKLAYER_ETHERNET;  // rates from bytes on the wire; no rate table
    opt.rate.rate = static_cast<uint32_t>(rate);
    opt.ceil = opt.rate;
    opt.buffer = buffer_ticks(burst, rate);
    opt.cbuffer = opt.buffer;
    opt.quantum = frame;
    for (uint32_t copy = 0; copy < SPAND_PACE_COPIES; ++copy) {
      nlh = mnl_nlmsg_put_header(buf);
      nlh->nlmsg_type = RTM_NEWTCLASS;
      nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
      put_tcmsg(nlh, ifindex, spand_pace_classid(bin, copy), kHandle);
      mnl_attr_put_strz(nlh, TCA_KIND, "htb");
      opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
      mnl_attr_put(nlh, TCA_HTB_PARMS, sizeof(opt), &opt);
      mnl_attr_nest_end(nlh, opts);
      if (!rtnl_.request(nlh, error)) {
        error = "pacing device " + dev + ": adding class " + std::to_string(bin) + "/" +
                std::to_string(copy) + ": " + error;
        return false;
      }
    }
  }
  return true;
}

bool PacingQdiscs::start(std::string& error) {
  busy_ = false;
  if (!rtnl_.open(error)) return false;
  for (const std::string& dev : devices_) {
    if (!install(dev, error)) {
      stop();
      return false;
    }
  }
  return true;
}

void PacingQdiscs::stop() {
  if (!rtnl_.is_open()) return;
  for (int ifindex : installed_) {
    std::string err;
    remove_root(ifindex, err);  // a device that went away took its qdisc with it
  }
  installed_.clear();
  locks_.clear();  // after the qdiscs are gone
  rtnl_.close();
}

}  // namespace spand::agent
