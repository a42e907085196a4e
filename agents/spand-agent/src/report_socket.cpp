#include "report_socket.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "spand_socket.h"

namespace spand::agent {

bool ReportSocket::open(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  unlink(path.c_str());
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int saved = errno;
    ::close(s);
    errno = saved;
    return false;
  }
  chmod(path.c_str(), 0666);  // any local application may report
  fd_ = s;
  path_ = path;
  return true;
}

void ReportSocket::receive(std::vector<ReportItem>& out) {
  spand_report_msg msg{};
  while (recv(fd_, &msg, sizeof(msg), 0) == static_cast<ssize_t>(sizeof(msg))) {
    if (msg.magic != SPAND_REPORT_MAGIC) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(static_cast<int>(msg.family), msg.peer_addr, buf, sizeof(buf));
    ReportItem item;
    item.client_address = buf;
    // A connection that ended without retransmission: its cwnd is a W_c sample (DESIGN.md).
    item.wc_segments = msg.total_retrans == 0 ? msg.snd_cwnd_segments : 0;
    item.rtt_us = msg.rtt_us;
    out.push_back(item);
  }
}

void ReportSocket::close() {
  if (fd_ < 0) return;
  ::close(fd_);
  unlink(path_.c_str());
  fd_ = -1;
}

}  // namespace spand::agent
