// linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before tcpi_bytes_acked.
#include "tcp_info_dump.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "sock_diag.hpp"

namespace spand::agent {

namespace {

// The kernel's TCP states (include/net/tcp_states.h, not in the UAPI headers).
enum KernelTcpState : uint32_t {
  kEstablished = 1,
  kFinWait1 = 4,
  kCloseWait = 8,
  kLastAck = 9,
  kListen = 10,
  kClosing = 11,
};

// Sockets that may still have data of ours in flight: after close() a server's socket sends
// the rest of its response in FIN_WAIT1, so a dump of ESTABLISHED alone would see transfers
// end early. FIN_WAIT2 and TIME_WAIT have everything acknowledged: the connection has ended.
constexpr uint32_t kSampledStates = (1u << kEstablished) | (1u << kFinWait1) | (1u << kCloseWait) |
                                    (1u << kLastAck) | (1u << kClosing);

struct ParseState {
  TcpInfoDump* out;
};

int on_msg(const nlmsghdr* nlh, void* data) {
  auto* st = static_cast<ParseState*>(data);
  auto* msg = static_cast<const inet_diag_msg*>(mnl_nlmsg_get_payload(nlh));
  uint16_t port = ntohs(msg->id.idiag_sport);
  if (msg->idiag_state == kListen) {
    st->out->listening_ports.insert(port);
    return MNL_CB_OK;
  }
  TcpInfoSnapshot s;
  s.cookie = static_cast<uint64_t>(msg->id.idiag_cookie[1]) << 32 | msg->id.idiag_cookie[0];
  s.local_port = port;
  s.remote = diag_remote(msg);
  bool have_info = false;
  // mnl_attr_for_each, spelled out: its void* to nlattr* conversion is C only.
  auto* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(nlh));
  for (auto* attr =
           static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(nlh, sizeof(inet_diag_msg)));
       mnl_attr_ok(attr, static_cast<int>(tail - reinterpret_cast<const char*>(attr)));
       attr = mnl_attr_next(attr)) {
    uint16_t type = mnl_attr_get_type(attr);
    uint16_t len = mnl_attr_get_payload_len(attr);
    if (type == INET_DIAG_INFO) {
      // An older kernel sends a shorter struct: the fields it lacks stay zero.
      tcp_info ti{};
      std::memcpy(&ti, mnl_attr_get_payload(attr), len < sizeof(ti) ? len : sizeof(ti));
      s.ca_state = static_cast<CaState>(ti.tcpi_ca_state);
      s.cwnd_segments = ti.tcpi_snd_cwnd;
      s.ssthresh_segments = ti.tcpi_snd_ssthresh;
      s.rtt_us = ti.tcpi_rtt;
      s.total_retrans = ti.tcpi_total_retrans;
      s.mss_bytes = ti.tcpi_snd_mss;
      s.bytes_acked = ti.tcpi_bytes_acked;
      s.delivery_rate_bytes_per_s = ti.tcpi_delivery_rate;
      s.min_rtt_us = ti.tcpi_min_rtt;
      s.unacked_segments = ti.tcpi_unacked;
      s.last_data_recv_ms = ti.tcpi_last_data_recv;
      have_info = true;
    } else if (type == INET_DIAG_CONG) {
      const char* name = static_cast<const char*>(mnl_attr_get_payload(attr));
      size_t n = strnlen(name, len);
      std::string cc(name, n);
      s.cc = cc == "reno" ? CcKind::kReno : cc == "cubic" ? CcKind::kCubic : CcKind::kOther;
    }
  }
  if (have_info) st->out->sockets.push_back(s);
  return MNL_CB_OK;
}

}  // namespace

bool dump_tcp_info(TcpInfoDump& out, std::string& error) {
  ParseState st{&out};
  return sock_diag_dump(kSampledStates | (1u << kListen),
                        (1u << (INET_DIAG_INFO - 1)) | (1u << (INET_DIAG_CONG - 1)), on_msg, &st,
                        error);
}

}  // namespace spand::agent
