#include "sock_diag.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cerrno>
#include <cstring>

namespace spand::agent {

namespace {

int on_msg(const nlmsghdr* nlh, void* data) {
  auto* out = static_cast<std::vector<TcpConn>*>(data);
  auto* msg = static_cast<inet_diag_msg*>(mnl_nlmsg_get_payload(nlh));
  TcpConn c;
  c.local_port = ntohs(msg->id.idiag_sport);
  c.listening = msg->idiag_state == TCP_LISTEN;
  c.remote = diag_remote(msg);
  out->push_back(c);
  return MNL_CB_OK;
}

}  // namespace

Prefix diag_remote(const inet_diag_msg* msg) {
  Prefix p;
  if (msg->idiag_family == AF_INET) {
    p.v4 = true;
    p.addr[10] = p.addr[11] = 0xff;
    std::memcpy(&p.addr[12], msg->id.idiag_dst, 4);
    p.len_bits = 32;
    return p;
  }
  p.v4 = false;
  std::memcpy(p.addr.data(), msg->id.idiag_dst, 16);
  p.len_bits = 128;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(p.addr.data(), kMapped, 12) == 0) {
    p.v4 = true;
    p.len_bits = 32;
  }
  return p;
}

bool sock_diag_dump(uint32_t state_mask, uint8_t ext_mask, SockDiagCallback on_msg, void* data,
                    std::string& error) {
  mnl_socket* nl = mnl_socket_open(NETLINK_INET_DIAG);
  if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    error = std::string("sock_diag socket: ") + std::strerror(errno);
    if (nl) mnl_socket_close(nl);
    return false;
  }
  bool ok = true;
  unsigned seq = 1;
  for (int family : {AF_INET, AF_INET6}) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    nlh->nlmsg_seq = seq;
    auto* req =
        static_cast<inet_diag_req_v2*>(mnl_nlmsg_put_extra_header(nlh, sizeof(inet_diag_req_v2)));
    req->sdiag_family = static_cast<uint8_t>(family);
    req->sdiag_protocol = IPPROTO_TCP;
    req->idiag_states = state_mask;
    req->idiag_ext = ext_mask;
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
      error = std::string("sock_diag send: ") + std::strerror(errno);
      ok = false;
      break;
    }
    for (;;) {
      ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
      if (n <= 0) {
        error = std::string("sock_diag recv: ") + std::strerror(errno);
        ok = false;
        break;
      }
      int r = mnl_cb_run(buf, n, seq, mnl_socket_get_portid(nl), on_msg, data);
      if (r == MNL_CB_ERROR) {
        error = std::string("sock_diag: ") + std::strerror(errno);
        ok = false;
        break;
      }
      if (r == MNL_CB_STOP) break;
    }
    if (!ok) break;
    ++seq;
  }
  mnl_socket_close(nl);
  return ok;
}

bool dump_tcp_sockets(std::vector<TcpConn>& out, std::string& error) {
  return sock_diag_dump((1u << TCP_LISTEN) | (1u << TCP_ESTABLISHED) | (1u << TCP_SYN_RECV), 0,
                        on_msg, &out, error);
}

}  // namespace spand::agent
