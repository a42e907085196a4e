// SPDX-License-Identifier: GPL-2.0
/* Scalable TCP (Kelly, "Scalable TCP: improving performance in highspeed wide area networks",
 * CCR 2003) as a BPF congestion control: a tcp_congestion_ops struct_ops map that the agent
 * registers (scalable_cc.cpp) under the name "spand_scalable", so it cannot clash with a kernel
 * module (tcp_scalable) or another program.
 *
 * The paper's rule, with a = 0.01, b = 0.125 and a legacy window of 16 segments:
 *   cwnd > 16:  cwnd += 0.01 per ACKed segment   (+1 every 100 ACKed segments: cwnd x 1.01 per RTT)
 *               on a loss, cwnd -= cwnd / 8       (ssthresh = 7/8 cwnd)
 *   cwnd <= 16: Reno, cwnd += 1 / cwnd per ACKed segment (+1 per RTT), halved on a loss.
 * Slow start below ssthresh as in Reno. Fractions of a segment are counted in integers the
 * kernel's way (snd_cwnd_cnt: +1 when it reaches the divisor).
 *
 * Unlike the kernel's old tcp_scalable module, whose divisor is min(cwnd, 100) (Reno's growth up
 * to 100 segments), the divisor here is 100 from the legacy window on, as in the paper. Built
 * against vmlinux.h generated at build time from the running kernel's BTF (meson.build). */
#include "vmlinux.h"
/* (separate block so that include sorting keeps the order) */
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL"; /* struct_ops programs must be GPL-compatible */

#define SCALABLE_LEGACY_WINDOW 16u /* segments: at or below it, Reno */
#define SCALABLE_AI_DIVISOR 100u   /* a = 1/100 segment per ACKed segment */
#define SCALABLE_MD_SHIFT 3        /* b = 1/8 */
#define SCALABLE_MIN_SSTHRESH 2u

static __always_inline struct tcp_sock *as_tcp(struct sock *sk) {
  /* The kernel hands tcp_congestion_ops callbacks a struct sock that is a tcp_sock. */
  return (struct tcp_sock *)sk;
}

/* Whether the window limited the sender in the last round: growing it otherwise would build
 * a window the sender never used (RFC 7661). In slow start, up to twice what is in flight. */
static __always_inline int cwnd_limited(struct tcp_sock *tp) {
  if (tp->snd_cwnd < tp->snd_ssthresh) return tp->snd_cwnd < 2 * tp->max_packets_out;
  return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited) != 0;
}

/* Slow start: one segment per ACKed segment, not past ssthresh. Returns the ACKed segments
 * left over for congestion avoidance. */
static __always_inline __u32 grow_slow_start(struct tcp_sock *tp, __u32 acked) {
  __u32 cwnd = tp->snd_cwnd + acked;
  __u32 room = 0;
  if (cwnd > tp->snd_ssthresh) {
    room = cwnd - tp->snd_ssthresh;
    cwnd = tp->snd_ssthresh;
  }
  if (cwnd > tp->snd_cwnd_clamp) cwnd = tp->snd_cwnd_clamp;
  tp->snd_cwnd = cwnd;
  return room;
}

/* Additive increase: one segment per `divisor` ACKed segments, the remainder kept in
 * snd_cwnd_cnt (so delayed ACKs, acked = 2, lose nothing). */
static __always_inline void grow_additive(struct tcp_sock *tp, __u32 divisor, __u32 acked) {
  __u32 cwnd = tp->snd_cwnd;
  __u32 cnt = tp->snd_cwnd_cnt;
  if (divisor == 0) divisor = 1;
  /* The divisor may have dropped since the count started (crossing the legacy window). */
  if (cnt >= divisor) {
    cnt = 0;
    cwnd++;
  }
  cnt += acked;
  if (cnt >= divisor) {
    __u32 add = cnt / divisor;
    cnt -= add * divisor;
    cwnd += add;
  }
  if (cwnd > tp->snd_cwnd_clamp) cwnd = tp->snd_cwnd_clamp;
  tp->snd_cwnd = cwnd;
  tp->snd_cwnd_cnt = cnt;
}

SEC("struct_ops/spand_scalable_cong_avoid")
void BPF_PROG(spand_scalable_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
  struct tcp_sock *tp = as_tcp(sk);
  if (!cwnd_limited(tp)) return;
  if (tp->snd_cwnd < tp->snd_ssthresh) {
    acked = grow_slow_start(tp, acked);
    if (!acked) return;
  }
  if (tp->snd_cwnd <= SCALABLE_LEGACY_WINDOW)
    grow_additive(tp, tp->snd_cwnd, acked); /* Reno: +1 per window of ACKs */
  else
    grow_additive(tp, SCALABLE_AI_DIVISOR, acked);
}

SEC("struct_ops/spand_scalable_ssthresh")
__u32 BPF_PROG(spand_scalable_ssthresh, struct sock *sk) {
  struct tcp_sock *tp = as_tcp(sk);
  __u32 cwnd = tp->snd_cwnd;
  __u32 next = cwnd <= SCALABLE_LEGACY_WINDOW ? cwnd >> 1 : cwnd - (cwnd >> SCALABLE_MD_SHIFT);
  return next > SCALABLE_MIN_SSTHRESH ? next : SCALABLE_MIN_SSTHRESH;
}

/* A loss found spurious (DSACK, timestamps): back to the window before the reduction. */
SEC("struct_ops/spand_scalable_undo_cwnd")
__u32 BPF_PROG(spand_scalable_undo_cwnd, struct sock *sk) {
  struct tcp_sock *tp = as_tcp(sk);
  return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC("struct_ops/spand_scalable_init")
void BPF_PROG(spand_scalable_init, struct sock *sk) {
  /* Nothing of its own: ssthresh and cwnd are left as the socket has them (the agent's
   * sock_ops program may have set them before switching to this congestion control). */
  as_tcp(sk)->snd_cwnd_cnt = 0;
}

SEC(".struct_ops")
struct tcp_congestion_ops spand_scalable = {
    .init = (void *)spand_scalable_init,
    .ssthresh = (void *)spand_scalable_ssthresh,
    .cong_avoid = (void *)spand_scalable_cong_avoid,
    .undo_cwnd = (void *)spand_scalable_undo_cwnd,
    .name = "spand_scalable",
};
