#include "spand_socket.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "spand.h"
#include "spand_maps.h"

namespace {

bool peer_and_port(int fd, sockaddr_storage& peer, uint16_t& local_port) {
  socklen_t len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  sockaddr_storage local{};
  len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return false;
  local_port = local.ss_family == AF_INET
                   ? ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port)
                   : ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  return true;
}

void mapped_addr(const sockaddr_storage& peer, uint8_t out[16]) {
  std::memset(out, 0, 16);
  if (peer.ss_family == AF_INET) {
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, 4);
  } else {
    std::memcpy(out, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, 16);
  }
}

// A pinned object of the agent: its pin directory is SPAND_PIN_DIR unless the environment
// names another (the agent's --pin-dir).
int open_pin(const char* name) {
  const char* dir = std::getenv(SPAND_PIN_DIR_ENV);
  const std::string path = std::string(dir && *dir ? dir : SPAND_PIN_DIR) + "/" + name;
  return bpf_obj_get(path.c_str());
}

}  // namespace

extern "C" int spand_tune(int fd, uint64_t transfer_bytes, uint32_t* cwnd_out) {
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return -errno;
  tcp_info ti{};
  len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -errno;
  // TCP_BPF_IW is refused once data left; the program would drop the request anyway.
  if (ti.tcpi_data_segs_out > 0) return SPAND_TUNE_TOO_LATE;
  int mss = 0;
  len = sizeof(mss);
  if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0) return -errno;
  sockaddr_storage peer{};
  uint16_t local_port = 0;
  if (!peer_and_port(fd, peer, local_port)) return -errno;

  int ports_fd = open_pin(SPAND_PIN_NAME_TUNE_PORTS_MAP);
  if (ports_fd < 0) return errno == ENOENT ? SPAND_TUNE_NO_AGENT : -errno;
  uint8_t enabled = 0;
  int port_rc = bpf_map_lookup_elem(ports_fd, &local_port, &enabled);
  close(ports_fd);
  // The program only watches tune ports for the first data: elsewhere the request would idle.
  if (port_rc != 0) return SPAND_TUNE_PORT_OFF;

  int prefix_fd = open_pin(SPAND_PIN_NAME_PREFIX_MAP);
  if (prefix_fd < 0) return errno == ENOENT ? SPAND_TUNE_NO_AGENT : -errno;
  int tune_fd = open_pin(SPAND_PIN_NAME_TUNE_MAP);
  if (tune_fd < 0) {
    int err = errno;
    close(prefix_fd);
    return err == ENOENT ? SPAND_TUNE_NO_AGENT : -err;
  }
  spand_prefix_key key{};
  key.prefixlen = SPAND_KEY_PORT_BITS + 128;
  key.data[0] = static_cast<uint8_t>(local_port >> 8);
  key.data[1] = static_cast<uint8_t>(local_port & 0xff);
  mapped_addr(peer, &key.data[2]);
  spand_policy pol{};
  int rc = bpf_map_lookup_elem(prefix_fd, &key, &pol);
  if (rc != 0) {
    key.data[0] = key.data[1] = 0;
    rc = bpf_map_lookup_elem(prefix_fd, &key, &pol);
  }
  int result = 0;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t now_ns = uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec);
  if (rc != 0 || (pol.expires_ns != 0 && now_ns >= pol.expires_ns)) {
    // No policy, or one its agent let expire (the program ignores it too).
    result = SPAND_TUNE_NO_ESTIMATE;
  } else {
    spand_cwnd_result r{};
    uint64_t segments = spand_segments_for_bytes(transfer_bytes, static_cast<uint32_t>(mss));
    // pol.wc_segments is already capped at the agent's max_initial_cwnd, so cwnd_opt is too.
    if (pol.wc_segments == 0 ||
        spand_cwnd_opt(pol.wc_segments, segments, pol.acked_per_ack ? pol.acked_per_ack : 1,
                       SPAND_LOSS_FREE, 1, &r) != SPAND_OK ||
        r.cwnd_opt == 0) {
      result = SPAND_TUNE_NO_ESTIMATE;
    } else {
      spand_policy req = pol;
      req.init_cwnd_segments = r.cwnd_opt;
      req.pacing_rate_bytes_per_s =
          pol.pacing_rate_bytes_per_s
              ? spand_pacing_rate_bytes_per_s(r.cwnd_opt, static_cast<uint32_t>(mss),
                                              static_cast<double>(pol.srtt_us))
              : 0;
      if (bpf_map_update_elem(tune_fd, &cookie, &req, BPF_ANY) != 0)
        result = -errno;
      else if (cwnd_out)
        *cwnd_out = r.cwnd_opt;
    }
  }
  close(prefix_fd);
  close(tune_fd);
  return result;
}

extern "C" int spand_report(int fd, const char* socket_path) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -errno;
  sockaddr_storage peer{};
  len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return -errno;
  spand_report_msg msg{};
  msg.magic = SPAND_REPORT_MAGIC;
  msg.family = peer.ss_family;
  if (peer.ss_family == AF_INET)
    std::memcpy(msg.peer_addr, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, 4);
  else
    std::memcpy(msg.peer_addr, &reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr, 16);
  msg.snd_cwnd_segments = ti.tcpi_snd_cwnd;
  msg.snd_ssthresh_segments = ti.tcpi_snd_ssthresh;
  msg.rtt_us = ti.tcpi_rtt;
  msg.total_retrans = ti.tcpi_total_retrans;

  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path ? socket_path : SPAND_REPORT_SOCKET,
               sizeof(addr.sun_path) - 1);
  ssize_t n =
      sendto(s, &msg, sizeof(msg), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = n < 0 ? -errno : 0;
  close(s);
  return err;
}
