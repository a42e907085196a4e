// One rtnetlink socket (libmnl) and the two exchanges spand-agent has with the kernel over it:
// a change acknowledged by the kernel, and a query (one reply, or a dump up to NLMSG_DONE).
// Used by route mode (routes) and the pacing classes (qdiscs and classes).
#pragma once

#include <libmnl/libmnl.h>

#include <string>

namespace spand::agent {

class Rtnl {
 public:
  Rtnl() = default;
  ~Rtnl() { close(); }
  Rtnl(const Rtnl&) = delete;
  Rtnl& operator=(const Rtnl&) = delete;

  bool open(std::string& error);
  void close();
  bool is_open() const { return nl_ != nullptr; }

  // Sends `nlh` with NLM_F_ACK and a fresh sequence number; true once the kernel acknowledged.
  bool request(nlmsghdr* nlh, std::string& error);
  // Sends `nlh` (fresh sequence number) and runs `cb(reply, data)` on each reply message: all
  // of them up to NLMSG_DONE when `nlh` asks for a dump (NLM_F_DUMP), else the one reply.
  bool query(nlmsghdr* nlh, mnl_cb_t cb, void* data, std::string& error);

 private:
  mnl_socket* nl_ = nullptr;
  unsigned seq_ = 1;
};

}  // namespace spand::agent
