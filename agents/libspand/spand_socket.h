/* libspand per-socket hooks, owned by spand-agent: spand_tune applies a transfer-size-specific
 * initial window to one socket before its first data; spand_report hands the socket's
 * TCP_INFO to the local spand-agent, which reports it through spand.v1 Report.
 * What each kernel mechanism can and cannot do: README, "spand-agent and libspand's socket hooks".
 */
#ifndef SPAND_SOCKET_H
#define SPAND_SOCKET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return values of spand_tune besides 0 (queued: applied by the agent's sock_ops program just
 * before the socket's first data) and negative errno values (EPERM without CAP_BPF, EBADF,
 * ENOTSOCK, ...). */
enum {
  SPAND_TUNE_NO_ESTIMATE = 1, /* no policy for the peer's prefix: the kernel default stays */
  SPAND_TUNE_TOO_LATE = 2,    /* data was already sent: the window can no longer be set */
  SPAND_TUNE_NO_AGENT = 3,    /* no spand-agent in BPF mode (no pinned map) */
  SPAND_TUNE_PORT_OFF = 4     /* the local port does not have tune = true in the agent */
};

/* Asks for the initial window that TCP/SPAND's cwnd_opt gives for `transfer_bytes` on this
 * connected TCP socket, with ssthresh and pacing as the agent's policy for the peer's prefix
 * says. Call it after accept()/connect() and before the first send. The local port must have
 * `tune = true` in the agent's config. Needs CAP_BPF (it writes the agent's pinned map).
 * If `cwnd_out` is not NULL, the window requested is stored there. */
int spand_tune(int fd, uint64_t transfer_bytes, uint32_t* cwnd_out);

/* The default path of the agent's report socket (config agent.report_socket). */
#define SPAND_REPORT_SOCKET "/run/spand-agent.sock"

/* What spand_report sends: one datagram per call, host byte order. */
#define SPAND_REPORT_MAGIC 0x53504e31u /* "SPN1" */
struct spand_report_msg {
  uint32_t magic;
  uint32_t family;       /* AF_INET or AF_INET6 */
  uint8_t peer_addr[16]; /* IPv4 in the first 4 bytes */
  uint32_t snd_cwnd_segments;
  uint32_t snd_ssthresh_segments;
  uint32_t rtt_us;
  uint32_t total_retrans;
};

/* Reads TCP_INFO of `fd` and sends it to the agent at `socket_path` (NULL: the default).
 * Returns 0, or a negative errno (ECONNREFUSED / ENOENT when no agent listens). */
int spand_report(int fd, const char* socket_path);

#ifdef __cplusplus
}
#endif

#endif /* SPAND_SOCKET_H */
