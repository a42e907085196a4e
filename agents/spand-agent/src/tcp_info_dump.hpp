// TCP_INFO of this namespace's connections in one sock_diag (NETLINK_INET_DIAG) dump with
// INET_DIAG_INFO and INET_DIAG_CONG, as `ss -ti` reads it: no per-socket system call.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tcp_info_sampler.hpp"

namespace spand::agent {

struct TcpInfoDump {
  std::vector<TcpInfoSnapshot> sockets;  // states that may still send data (see the .cpp)
  std::set<uint16_t> listening_ports;
};

// false with `error` set when the dump fails (then `out` is incomplete: do not use it).
bool dump_tcp_info(TcpInfoDump& out, std::string& error);

// The sockets accepted on a listening port that `want_port` accepts.
template <typename Pred>
std::vector<TcpInfoSnapshot> accepted_sockets(const TcpInfoDump& dump, Pred want_port) {
  std::vector<TcpInfoSnapshot> out;
  for (const auto& s : dump.sockets)
    if (dump.listening_ports.count(s.local_port) && want_port(s.local_port)) out.push_back(s);
  return out;
}

}  // namespace spand::agent
