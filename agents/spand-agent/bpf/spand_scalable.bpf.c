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
#define SCALABLE_INFINITE_SSTHRESH 0x7fffffffu /* the kernel's TCP_INFINITE_SSTHRESH */
/* The most a window may exceed the largest this program has seen (segments). Slow start at
 * most doubles a window per round trip and the program sees every ACK's growth; an undo
 * restores a window seen before; a successful path MTU probe rescales cwnd by the ratio of
 * the MTUs (tcp_mtup_probe_success), at most ~8.5 from the 1024-byte base MSS to a 9000-byte
 * MTU. Loose on purpose: what it is for are windows of 10^8 segments (lab_truth.md). */
#define SCALABLE_SANE_FACTOR 9u
#define SCALABLE_SANE_MARGIN 64u
#define SCALABLE_SANE_MAX (1u << 20) /* no real window: ~1.5 GB in flight */

/* Per socket, in the congestion control's private area (icsk_ca_priv, zeroed by the kernel
 * when a socket takes this congestion control, and again by init). */
struct scalable_state {
  __u32 max_cwnd;      /* largest snd_cwnd seen by a callback (0: none yet) */
  __u32 last_ssthresh; /* what the ssthresh callback last returned (0: never called) */
  __u32 repaired;      /* windows put back in range (cwnd or ssthresh beyond any seen) */
  __u32 start_ssthresh; /* the finite ssthresh the socket had at the first callback (the
                         * agent's policy or the route's metrics may set one above the
                         * first window): never taken for out of range */
};

static __always_inline struct tcp_sock *as_tcp(struct sock *sk) {
  /* The kernel hands tcp_congestion_ops callbacks a struct sock that is a tcp_sock. */
  return (struct tcp_sock *)sk;
}

static __always_inline struct scalable_state *state_of(struct sock *sk) {
  return (struct scalable_state *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* The largest window that can follow from what this program has seen. */
static __always_inline __u32 sane_bound(const struct scalable_state *st) {
  __u32 b = st->max_cwnd * SCALABLE_SANE_FACTOR + SCALABLE_SANE_MARGIN;
  return b < SCALABLE_SANE_MAX ? b : SCALABLE_SANE_MAX;
}

/* The largest ssthresh that can follow: as a window, or the one the socket started with. */
static __always_inline __u32 sane_ssthresh_bound(const struct scalable_state *st) {
  __u32 b = sane_bound(st);
  return st->start_ssthresh > b ? st->start_ssthresh : b;
}

static __always_inline void note_cwnd(struct tcp_sock *tp, struct scalable_state *st,
                                      __u32 cwnd) {
  if (!st->max_cwnd && tp->snd_ssthresh != SCALABLE_INFINITE_SSTHRESH &&
      tp->snd_ssthresh <= SCALABLE_SANE_MAX)
    st->start_ssthresh = tp->snd_ssthresh;
  if (cwnd > st->max_cwnd && cwnd <= SCALABLE_SANE_MAX) st->max_cwnd = cwnd;
}

/* A window no event could have produced (one from an ssthresh or prior_cwnd the kernel
 * restored or copied on the way out of recovery, lab_truth.md: 6 -> 667073280 segments) is put
 * back to what this program decided last (its last ssthresh, else the largest window seen). */
static __always_inline void repair(struct tcp_sock *tp, struct scalable_state *st) {
  __u32 bound, back;
  if (!st->max_cwnd) return; /* nothing seen yet: the first window is the kernel's (or the
                              * agent's initial window) */
  bound = sane_bound(st);
  back = st->last_ssthresh && st->last_ssthresh <= bound ? st->last_ssthresh : st->max_cwnd;
  if (back < SCALABLE_MIN_SSTHRESH) back = SCALABLE_MIN_SSTHRESH;
  if (tp->snd_ssthresh != SCALABLE_INFINITE_SSTHRESH &&
      tp->snd_ssthresh > sane_ssthresh_bound(st)) {
    tp->snd_ssthresh = back;
    st->repaired++;
  }
  if (tp->snd_cwnd > bound) {
    tp->snd_cwnd = back;
    tp->snd_cwnd_cnt = 0;
    st->repaired++;
  }
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
  struct scalable_state *st = state_of(sk);
  repair(tp, st);
  note_cwnd(tp, st, tp->snd_cwnd);
  if (!cwnd_limited(tp)) return;
  if (tp->snd_cwnd < tp->snd_ssthresh) {
    acked = grow_slow_start(tp, acked);
    if (!acked) return;
  }
  if (tp->snd_cwnd <= SCALABLE_LEGACY_WINDOW)
    grow_additive(tp, tp->snd_cwnd, acked); /* Reno: +1 per window of ACKs */
  else
    grow_additive(tp, SCALABLE_AI_DIVISOR, acked);
  note_cwnd(tp, st, tp->snd_cwnd);
}

/* The paper's decrease: halved at or below the legacy window, 7/8 above, at least 2. */
static __always_inline __u32 decreased(__u32 cwnd) {
  __u32 next = cwnd <= SCALABLE_LEGACY_WINDOW ? cwnd >> 1 : cwnd - (cwnd >> SCALABLE_MD_SHIFT);
  return next > SCALABLE_MIN_SSTHRESH ? next : SCALABLE_MIN_SSTHRESH;
}

SEC("struct_ops/spand_scalable_ssthresh")
__u32 BPF_PROG(spand_scalable_ssthresh, struct sock *sk) {
  struct tcp_sock *tp = as_tcp(sk);
  struct scalable_state *st = state_of(sk);
  __u32 cwnd = tp->snd_cwnd;
  __u32 next;
  /* The window being reduced must itself be one that could follow from what was seen. */
  if (st->max_cwnd && cwnd > sane_bound(st)) cwnd = st->max_cwnd;
  note_cwnd(tp, st, cwnd);
  next = decreased(cwnd);
  st->last_ssthresh = next;
  return next;
}

/* A loss found spurious (DSACK, timestamps): back to the window before the reduction, as the
 * kernel's tcp_reno_undo_cwnd (max(snd_cwnd, prior_cwnd)), but never to a prior_cwnd beyond
 * any window seen (prior_cwnd is the snd_cwnd the ssthresh callback saw, so a sane one is
 * always within the bound). The kernel also puts back prior_ssthresh on its own
 * (tcp_undo_cwnd_reduction); cong_avoid repairs that one if it is out of range. */
SEC("struct_ops/spand_scalable_undo_cwnd")
__u32 BPF_PROG(spand_scalable_undo_cwnd, struct sock *sk) {
  struct tcp_sock *tp = as_tcp(sk);
  struct scalable_state *st = state_of(sk);
  __u32 cwnd = tp->snd_cwnd;
  __u32 prior = tp->prior_cwnd;
  if (st->max_cwnd) {
    __u32 bound = sane_bound(st);
    if (prior > bound) prior = st->max_cwnd;
    if (cwnd > bound) cwnd = st->max_cwnd;
  }
  return cwnd > prior ? cwnd : prior;
}

/* Entering a reduction: the kernel has just set snd_ssthresh from ssthresh() and prior_cwnd
 * from snd_cwnd (tcp_init_cwnd_reduction, tcp_enter_loss), then calls this. An ssthresh out
 * of range here is not the one ssthresh() computes: it is recomputed from prior_cwnd, so that
 * the recovery and its end (tcp_end_cwnd_reduction: cwnd = ssthresh) follow the paper. */
SEC("struct_ops/spand_scalable_set_state")
void BPF_PROG(spand_scalable_set_state, struct sock *sk, __u8 new_state) {
  struct tcp_sock *tp = as_tcp(sk);
  struct scalable_state *st = state_of(sk);
  __u32 bound, cwnd;
  if (new_state != TCP_CA_CWR && new_state != TCP_CA_Recovery && new_state != TCP_CA_Loss)
    return;
  if (!st->max_cwnd) return;
  bound = sane_bound(st);
  if (tp->snd_ssthresh == SCALABLE_INFINITE_SSTHRESH ||
      tp->snd_ssthresh <= sane_ssthresh_bound(st))
    return;
  cwnd = tp->prior_cwnd <= bound ? tp->prior_cwnd : st->max_cwnd;
  tp->snd_ssthresh = decreased(cwnd);
  st->last_ssthresh = tp->snd_ssthresh;
  st->repaired++;
}

/* The end of a reduction (tcp_end_cwnd_reduction has just copied ssthresh into cwnd) and the
 * other events: windows put back in range before anything is sent with them. */
SEC("struct_ops/spand_scalable_cwnd_event")
void BPF_PROG(spand_scalable_cwnd_event, struct sock *sk, enum tcp_ca_event ev) {
  repair(as_tcp(sk), state_of(sk));
}

SEC("struct_ops/spand_scalable_init")
void BPF_PROG(spand_scalable_init, struct sock *sk) {
  /* Nothing of its own: ssthresh and cwnd are left as the socket has them (the agent's
   * sock_ops program may have set them before switching to this congestion control). */
  struct scalable_state *st = state_of(sk);
  as_tcp(sk)->snd_cwnd_cnt = 0;
  st->max_cwnd = 0;
  st->last_ssthresh = 0;
  st->repaired = 0;
  st->start_ssthresh = 0;
}

SEC(".struct_ops")
struct tcp_congestion_ops spand_scalable = {
    .init = (void *)spand_scalable_init,
    .ssthresh = (void *)spand_scalable_ssthresh,
    .cong_avoid = (void *)spand_scalable_cong_avoid,
    .undo_cwnd = (void *)spand_scalable_undo_cwnd,
    .set_state = (void *)spand_scalable_set_state,
    .cwnd_event = (void *)spand_scalable_cwnd_event,
    .name = "spand_scalable",
};
