#include "rtnl.hpp"

#include <cerrno>
#include <cstring>

namespace spand::agent {

bool Rtnl::open(std::string& error) {
  nl_ = mnl_socket_open(NETLINK_ROUTE);
  if (!nl_ || mnl_socket_bind(nl_, 0, MNL_SOCKET_AUTOPID) < 0) {
    error = std::string("rtnetlink socket: ") + std::strerror(errno);
    close();
    return false;
  }
  return true;
}

void Rtnl::close() {
  if (nl_) mnl_socket_close(nl_);
  nl_ = nullptr;
}

bool Rtnl::request(nlmsghdr* nlh, std::string& error) {
  nlh->nlmsg_flags |= NLM_F_ACK;
  return query(nlh, nullptr, nullptr, error);
}

bool Rtnl::query(nlmsghdr* nlh, mnl_cb_t cb, void* data, std::string& error) {
  nlh->nlmsg_seq = seq_++;
  if (mnl_socket_sendto(nl_, nlh, nlh->nlmsg_len) < 0) {
    error = std::string("rtnetlink send: ") + std::strerror(errno);
    return false;
  }
  const bool dump = nlh->nlmsg_flags & NLM_F_DUMP;
  const unsigned seq = nlh->nlmsg_seq;
  char buf[MNL_SOCKET_BUFFER_SIZE];
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(nl_, buf, sizeof(buf));
    const int r =
        n < 0 ? MNL_CB_ERROR : mnl_cb_run(buf, n, seq, mnl_socket_get_portid(nl_), cb, data);
    if (r < 0) {
      error = std::string("rtnetlink: ") + std::strerror(errno);
      return false;
    }
    if (r == MNL_CB_STOP || !dump) return true;
  }
}

}  // namespace spand::agent
