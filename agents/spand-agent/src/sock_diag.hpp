// Which clients connect: a sock_diag (NETLINK_INET_DIAG) dump of TCP sockets, as `ss` does.
// The agent learns the prefixes to fetch from connections accepted on listening ports.
#pragma once

#include <linux/inet_diag.h>
#include <linux/netlink.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "prefix.hpp"

namespace spand::agent {

struct TcpConn {
  uint16_t local_port = 0;
  Prefix remote;  // full-length address
  bool listening = false;
};

// One NETLINK_INET_DIAG dump of the TCP sockets (IPv4 then IPv6) whose state bit is in
// `state_mask`, with the `ext_mask` extensions (INET_DIAG_* bits); each reply message goes to
// `on_msg` (a libmnl callback) with `data`. false with `error` set when the dump fails.
using SockDiagCallback = int (*)(const nlmsghdr* nlh, void* data);
// The remote address of a dump message, full length; an IPv4 client of a dual-stack socket
// (IPv4-mapped) counts as IPv4.
Prefix diag_remote(const inet_diag_msg* msg);
bool sock_diag_dump(uint32_t state_mask, uint8_t ext_mask, SockDiagCallback on_msg, void* data,
                    std::string& error);

// All TCP sockets in LISTEN, SYN_RECV and ESTABLISHED of this network namespace.
// false with `error` set when the dump fails.
bool dump_tcp_sockets(std::vector<TcpConn>& out, std::string& error);

// Remote addresses of connections accepted on a listening port that `want_port` accepts.
template <typename Pred>
std::vector<Prefix> accepted_remotes(const std::vector<TcpConn>& conns, Pred want_port) {
  std::set<uint16_t> listening;
  for (const auto& c : conns)
    if (c.listening) listening.insert(c.local_port);
  std::vector<Prefix> out;
  for (const auto& c : conns)
    if (!c.listening && listening.count(c.local_port) && want_port(c.local_port))
      out.push_back(c.remote);
  return out;
}

}  // namespace spand::agent
