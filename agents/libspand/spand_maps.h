/* The one definition of the maps shared by the sock_ops program (spand_sockops.bpf.c) and
 * user space (spand-agent, spand_tune). Plain C with fixed-width types so that both clang
 * -target bpf and the host compilers lay the structs out identically. */
#ifndef SPAND_MAPS_H
#define SPAND_MAPS_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 spand_u8;
typedef __u16 spand_u16;
typedef __u32 spand_u32;
typedef __u64 spand_u64;
#else
#include <stdint.h>
typedef uint8_t spand_u8;
typedef uint16_t spand_u16;
typedef uint32_t spand_u32;
typedef uint64_t spand_u64;
#endif

/* Pins under bpffs: spand_tune opens the tune map by its name, a restarted agent finds the
 * previous instance's link and maps by these names. The directory is the agent's pin_dir
 * (--pin-dir; one agent per directory, which it holds an flock on while it runs), by default
 * SPAND_PIN_DIR; spand_tune reads it from the environment variable SPAND_PIN_DIR_ENV. */
#define SPAND_PIN_DIR "/sys/fs/bpf/spand"
#define SPAND_PIN_DIR_ENV "SPAND_AGENT_PIN_DIR"
#define SPAND_PIN_NAME_LINK "sockops_link"
#define SPAND_PIN_NAME_PREFIX_MAP "prefix_policy"
#define SPAND_PIN_NAME_TUNE_MAP "sock_tune"
#define SPAND_PIN_NAME_STATS_MAP "stats"
#define SPAND_PIN_NAME_TUNE_PORTS_MAP "tune_ports"

/* Rule 11, the queue standing now (docs/DESIGN.md): the first window a connection whose
 * handshake took hs_rtt_us may send. The handshake's RTT over the propagation RTT is the queue
 * its SYN-ACK waited in; a queue of 2 ms and at least a quarter of the buffer (room_us, the
 * largest queueing delay seen) is a standing one (less is the delay line's or the hosts'
 * jitter: on the idle path a handshake 3.8 ms over the propagation RTT, with 20 ms of buffer
 * seen, left a 30 KB transfer to the kernel under an eighth): the link is busy, and every byte of a
 * first window adds to that queue until the others back off. The window is then what the buffer has
 * left, rate x (room - queued), in segments: `iw` when that holds it, 0 (leave the socket to
 * the kernel) when the room holds no window of min_gain segments or above IW (min_cwnd). Used
 * by the sock_ops program and unit-tested as plain C. */
#define SPAND_QUEUE_MIN_US 2000u
/* Whether the handshake waited in a queue: 2 ms or more over the propagation RTT (less is the
 * handshake's jitter on an idle path). Rule 12 paces the kernel's first window then. */
static inline int spand_handshake_queued(spand_u32 hs_rtt_us, spand_u32 prop_rtt_us) {
  return prop_rtt_us && hs_rtt_us >= prop_rtt_us + SPAND_QUEUE_MIN_US;
}
/* Whether the handshake waited 1 ms or more over the propagation RTT: rule 12's first of a batch
 * sends its whole window then (a long flow keeps the buffer busy). Into an empty buffer the
 * burst took room other hosts' windows needed (default flows beside spand's 1.07-1.11 of their
 * time alone); the lab's idle handshakes read at most 0.9 ms over the propagation RTT, those
 * behind its bulk flow 0-30 ms (a third under 1 ms, half under 2 ms). */
#define SPAND_BURST_QUEUE_MIN_US 1000u
static inline int spand_handshake_waited(spand_u32 hs_rtt_us, spand_u32 prop_rtt_us) {
  return prop_rtt_us && hs_rtt_us >= prop_rtt_us + SPAND_BURST_QUEUE_MIN_US;
}
/* ... in a standing queue: also a quarter of the buffer in time (room_us) or more (rule 11). */
static inline int spand_standing_queue(spand_u32 hs_rtt_us, spand_u32 prop_rtt_us,
                                       spand_u32 room_us) {
  return room_us && spand_handshake_queued(hs_rtt_us, prop_rtt_us) &&
         (spand_u64)(hs_rtt_us - prop_rtt_us) * 4 >= room_us;
}
static inline spand_u32 spand_queue_window(spand_u32 iw, spand_u32 hs_rtt_us, spand_u32 prop_rtt_us,
                                           spand_u32 room_us, spand_u64 rate_bytes_per_s,
                                           spand_u32 mss, spand_u32 min_gain, spand_u32 min_cwnd) {
  spand_u32 queued;
  spand_u64 left, fit;
  if (!rate_bytes_per_s || !mss || !spand_standing_queue(hs_rtt_us, prop_rtt_us, room_us))
    return iw;
  queued = hs_rtt_us - prop_rtt_us;
  left = queued >= room_us ? 0 : rate_bytes_per_s * (room_us - queued) / 1000000;
  fit = left / mss;
  if (fit >= iw) return iw;
  if (fit < min_gain || fit <= min_cwnd) return 0;
  return (spand_u32)fit;
}

/* Rule 12's rank gate (SPAND_POLICY_PACE_RANK): the segments the buffer has free for this host's
 * first windows in flight: the buffer in time (room_us, the largest queueing delay seen, but no
 * more than one propagation RTT) minus what the handshake waited, at the path's rate. The cap: a
 * smoothed RTT stretched by recovery reads far above the buffer (89-131 ms of queueing on the lab's
 * 50 ms buffer under 8 concurrent transfers), and would have left every window unpaced. */
static inline spand_u64 spand_floor_free(spand_u32 hs_rtt_us, spand_u32 prop_rtt_us,
                                         spand_u32 room_us, spand_u64 rate_bytes_per_s,
                                         spand_u32 mss) {
  spand_u32 queued = hs_rtt_us > prop_rtt_us ? hs_rtt_us - prop_rtt_us : 0;
  if (room_us > prop_rtt_us) room_us = prop_rtt_us;
  if (!rate_bytes_per_s || !mss || !room_us || queued >= room_us) return 0;
  return rate_bytes_per_s * (room_us - queued) / 1000000u / mss;
}

/* Rule 12's first window for the n-th socket of a batch: the first sends `burst` segments (the
 * window it would get alone) when that fits the free room; the n-th after it goes as the kernel's
 * `iw` while the first's window plus n - 1 more of `iw` fit; 0 = paced. */
static inline spand_u32 spand_floor_window(spand_u32 n, spand_u32 iw, spand_u32 burst,
                                           spand_u32 hs_rtt_us, spand_u32 prop_rtt_us,
                                           spand_u32 room_us, spand_u64 rate_bytes_per_s,
                                           spand_u32 mss) {
  spand_u64 free_segments =
      spand_floor_free(hs_rtt_us, prop_rtt_us, room_us, rate_bytes_per_s, mss);
  spand_u64 first;
  if (!n) return 0;
  if (burst < iw) burst = iw;
  first = burst <= free_segments ? burst : iw;
  if (first + (spand_u64)(n - 1) * iw > free_segments) return 0;
  return n == 1 ? (spand_u32)first : iw;
}

/* The rank gate alone (no burst): whether the n-th first window of `iw` still fits. */
static inline int spand_floor_fits(spand_u32 n, spand_u32 iw, spand_u32 hs_rtt_us,
                                   spand_u32 prop_rtt_us, spand_u32 room_us,
                                   spand_u64 rate_bytes_per_s, spand_u32 mss) {
  return spand_floor_window(n, iw, 0, hs_rtt_us, prop_rtt_us, room_us, rate_bytes_per_s, mss) != 0;
}

/* Whether the buffer (room_us, the largest queueing delay seen, at rate) holds fewer than
 * `segments` segments: then the kernel's own first window, sent back to back, overflows it by
 * itself. Where rule 11 leaves such a socket to the kernel, the kernel's window is paced at the
 * path's rate instead (the paper's Scenario 2: a 10 KB buffer holds 7 of IW10's segments, and
 * the ten transfers rule 11 left to the kernel in one run took 1.20-2.47 s against 0.55 s for
 * the applied ones). */
static inline int spand_room_under(spand_u32 room_us, spand_u64 rate_bytes_per_s, spand_u32 mss,
                                   spand_u32 segments) {
  return room_us && rate_bytes_per_s && mss &&
         rate_bytes_per_s * room_us < (spand_u64)segments * mss * 1000000u;
}

/* LPM key: the local port is the leading 16 bits so that one trie holds per-port policies
 * (cwnd_opt depends on the port's typical response size); port 0 is the fallback for any
 * port. Addresses are IPv6; IPv4 is stored IPv4-mapped (::ffff:a.b.c.d). prefixlen counts
 * bits of port + address: 16 + 96 + 24 for an IPv4 /24. */
#define SPAND_KEY_PORT_BITS 16u
#define SPAND_KEY_V4MAPPED_BITS 96u
struct spand_prefix_key {
  spand_u32 prefixlen;
  spand_u8 data[18]; /* port (network order) then the 16-byte address */
};

/* spand_policy.flags */
#define SPAND_POLICY_SET_CC 0x1u     /* switch congestion control to cc_name */
#define SPAND_POLICY_SKIP_SS 0x2u    /* ssthresh := ssthresh_segments or init_cwnd (the clamp) */
#define SPAND_POLICY_CA_EMULATE 0x4u /* after the first window: raise the clamp 1 seg/RTT */
/* spand_sock_state.flags only: the first window is paced, lift the rate after it */
/* Divide the window and the pacing rate among the first windows in flight toward the client's
 * network (prefix_active): n connections starting together share what one would get. */
#define SPAND_POLICY_SHARE 0x8u
/* With SPAND_POLICY_SHARE: divide only the pacing rate (and the cwnd that raises it); each
 * connection keeps the whole first window. */
#define SPAND_POLICY_SHARE_RATE 0x10u
/* Rule 12: the policy is the kernel's own start, paced; only for a handshake that waited in a
 * queue (spand_handshake_queued on prop_rtt_us), else the socket is left to the kernel. */
#define SPAND_POLICY_PACE_QUEUED 0x20u
/* The sockets of this policy count under the policy's own prefix (net_len bits of the client's
 * IPv4-mapped address) in prefix_active and, when it is longer than the program's fixed
 * prefix_len_v4/v6 network, in prefix_rate: a prefix map's /16 shares one count of first windows
 * in flight. Without it both are keyed by the fixed network. Set by the agent with a prefix map
 * for a policy whose prefix is not that fixed network. */
#define SPAND_POLICY_OWN_NET 0x40u
/* With SPAND_POLICY_PACE_QUEUED: the gate is the socket's rank, not its handshake's queue. The
 * program counts such first windows in flight per host (prefix_active's key of length 0: the
 * lab's 8 concurrent clients sat in three /24s behind one bottleneck); those that fit in the
 * buffer's free room with the ones before them (spand_floor_fits) are left to the kernel, the
 * later ones are paced, all of one rate bin through one HTB class at the rate (no 4 copies, no
 * class above the rate), so that they reach the bottleneck one after another (docs/DESIGN.md,
 * rule 12). */
#define SPAND_POLICY_PACE_RANK 0x80u
#define SPAND_STATE_PACED 0x100u
#define SPAND_STATE_COUNTED 0x200u /* the socket is counted in prefix_active */
#define SPAND_STATE_TRAIN 0x400u   /* timing the ACKs of the socket's first flight */
#define SPAND_STATE_CLASSED \
  0x800u /* first window acked, still in its pacing class until unclass_mark */

/* prefix_rate's value: the bottleneck rate read from the dispersion of first-flight ACK trains
 * toward a client network (struct spand_active_key: the fixed network, or the socket's
 * SPAND_POLICY_OWN_NET prefix when that is the longer one, so that a reading never spans two
 * map prefixes and the agent, which credits it to the map prefix holding it, keeps one reading
 * per fixed network), the largest since the agent last took the entry. A flight sent back to back
 * reaches the client at the bottleneck's rate, and its ACKs come back spaced so: bytes acked over
 * the time between the first and the last ACK of the flight (4 segments at least; an ACK that came
 * much later than the train's pace, a delayed ACK or one after a loss, ends the train) is that
 * rate. */
struct spand_rate_reading {
  spand_u64 rate_bytes_per_s; /* 0: only paced trains since the agent last took the entry */
  spand_u32 trains;
  /* The largest rate of a first flight spand paced whose ACKs came at its pacing (80 % of it
   * or faster): not a reading of the bottleneck, only a lower bound of it (the path delivered
   * at least that); the agent keeps the rate it paced with alive by it (PathRates::confirm).
   * Bytes per second, saturating at 2^32 - 1. */
  spand_u32 paced_rate_bytes_per_s;
};

#define SPAND_CC_NAME_LEN 16

struct spand_policy {
  spand_u32 init_cwnd_segments;      /* TCP_BPF_IW; 0 = leave the kernel default */
  spand_u32 flags;                   /* SPAND_POLICY_* */
  spand_u64 pacing_rate_bytes_per_s; /* SO_MAX_PACING_RATE for the first window; 0 = none */
  spand_u32 syn_rto_jiffies;         /* BPF_SOCK_OPS_TIMEOUT_INIT reply; 0 = kernel default */
  /* The estimate behind the numbers above, for spand_tune's per-socket cwnd_opt. */
  spand_u32 wc_segments;
  spand_u32 srtt_us;
  spand_u32 acked_per_ack;         /* b */
  char cc_name[SPAND_CC_NAME_LEN]; /* with SPAND_POLICY_SET_CC */
  /* With SPAND_POLICY_SHARE: the least a shared window gets (the kernel's initial window). */
  spand_u32 min_cwnd_segments;
  /* With SPAND_POLICY_SKIP_SS: ssthresh and the clamp when above the initial window (slow start
   * from the first window up to it); 0 = the initial window. */
  spand_u32 ssthresh_segments;
  /* CLOCK_MONOTONIC time (bpf_ktime_get_ns) from which the program ignores the policy, so
   * that an agent that died without removing it (SIGKILL) stops applying its estimates when
   * they would have become too old (policy.max_age_s); 0 = no deadline. */
  spand_u64 expires_ns;
  /* The cwnd set at the start when above init_cwnd_segments (0 = the same): the kernel paces at
   * a ratio of cwnd / srtt, so it raises the first window's pacing toward
   * pacing_rate_bytes_per_s; only init_cwnd_segments count as the first window. */
  spand_u32 pacing_cwnd_segments;
  /* The queue standing now (rule 11): with queue_room_us set, a handshake RTT (srtt at
   * establishment) above prop_rtt_us by an eighth of queue_room_us or more says the bottleneck
   * holds a queue, so the link is busy and every byte of the first window adds to that queue;
   * the window is cut to what the room left holds, path_rate_bytes_per_s x (queue_room_us -
   * queued), and left to the kernel when that is under min_gain_segments. */
  spand_u32 prop_rtt_us;           /* propagation RTT (the smallest known) */
  spand_u64 path_rate_bytes_per_s; /* the bottleneck rate the room is read at */
  spand_u32 queue_room_us;         /* the largest queueing delay seen: the buffer in time */
  spand_u32 min_gain_segments;     /* the smallest first window that saves a round */
  /* With SPAND_POLICY_OWN_NET: the length of the policy's own prefix in the IPv4-mapped space
   * (its key's prefixlen without the port: 96 + 16 for an IPv4 /16). */
  spand_u32 net_len;
  /* With SPAND_POLICY_PACE_RANK: the window the transfer would get alone (rule 2, not divided
   * among the host's senders); the first of a batch sends it as one burst when it fits the
   * buffer's free room (0: the kernel's initial window). */
  spand_u32 floor_burst_segments;
};

/* prefix_active's and prefix_rate's key: a client network, the client address masked to `len`
 * bits: the agent's fixed prefix length (96 + prefix_len_v4 for an IPv4 socket, prefix_len_v6
 * for an IPv6 one), or a SPAND_POLICY_OWN_NET policy's net_len. */
struct spand_active_key {
  spand_u32 len;     /* bits of data that count, in the IPv4-mapped space */
  spand_u8 data[16]; /* IPv4-mapped for IPv4 */
};

/* Per-socket state kept by the program between callbacks, keyed by socket cookie. */
#define SPAND_PHASE_FIRST_WINDOW 1u /* paced; ssthresh = clamp = init window or above */
#define SPAND_PHASE_AFTER 2u        /* pacing lifted; clamp raised once per RTT */
struct spand_sock_state {
  spand_u32 phase;
  spand_u32 flags;              /* copied from the policy */
  spand_u64 first_window_bytes; /* bytes_acked that ends the first window */
  spand_u32 raise_mark_snd_nxt; /* next clamp raise once snd_una passes this */
  spand_u32 train_end;          /* snd_nxt at the first ACK of data: the first flight ends there */
  spand_u64 train_t0_ns;        /* the train's first ACK (1: the flight's first ACK seen) */
  spand_u64 train_b0;           /* its acknowledgment number */
  spand_u64 train_last;         /* the previous ACK's acknowledgment number */
  spand_u64 train_last_ns;      /* and its time */
  spand_u64 train_rate;         /* bytes per second over the train so far */
  spand_u32 unclass_mark;       /* snd_nxt when the first window was acked */
  spand_u32 train_pacing;       /* the kernel's pacing rate (B/s) at the flight's first ACK */
  spand_u32 net_len;            /* the policy's net_len, with SPAND_POLICY_OWN_NET in flags */
  spand_u32 reserved;
};

/* stats array indices (per-CPU counters read by the agent and the tests) */
enum spand_stat {
  SPAND_STAT_LOOKUPS = 0,
  SPAND_STAT_APPLIED,
  SPAND_STAT_IW_FAILED,
  SPAND_STAT_CLAMP_FAILED,
  SPAND_STAT_PACING_FAILED,
  SPAND_STAT_CC_FAILED,
  SPAND_STAT_PACING_LIFTED,
  SPAND_STAT_CLAMP_RAISED,
  SPAND_STAT_TUNE_APPLIED,
  SPAND_STAT_STATE_FULL,
  SPAND_STAT_RTO_SEEDED,
  SPAND_STAT_PACE_CLASSED,   /* first window put in a pacing class (SO_PRIORITY) */
  SPAND_STAT_PACE_UNCLASSED, /* priority back to 0 once the first window is acked */
  SPAND_STAT_PACE_SKIPPED,   /* socket had its own priority: left alone */
  SPAND_STAT_TRAIN_TIMED,    /* first flights whose ACK train is being timed */
  SPAND_STAT_TRAIN_RATED,    /* ... that gave a rate reading (prefix_rate) */
  SPAND_STAT_SHARED,         /* first windows shared with others in flight (prefix_active) */
  SPAND_STAT_EXPIRED,        /* a policy or spand_tune request found past its expires_ns */
  SPAND_STAT_TRAIN_OWN_PACE, /* trains not recorded: they read the socket's own pacing */
  SPAND_STAT_QUEUE_CUT,      /* first windows cut to the room a standing queue left (rule 11) */
  SPAND_STAT_QUEUE_LEFT,     /* ... left to the kernel: the room held no window that gains */
  SPAND_STAT_FLOOR_PACED,    /* rule 12: the kernel's IW paced (the handshake waited in a queue) */
  SPAND_STAT_FLOOR_LEFT,     /* rule 12: no queue at the handshake, left to the kernel */
  SPAND_STAT_QUEUE_PACED,    /* rule 11: the kernel's window paced, the buffer holds less */
  SPAND_STAT_COUNT
};

/* Pacing the whole first window with HTB (agent.pace_devices). Linux's TCP-internal pacing
 * leaves a socket's first 10 segments unpaced (tcp_update_skb_after_send), and this kernel
 * has neither fq nor etf to honour departure times, so the agent installs an HTB root qdisc
 * with handle SPAND_HTB_MAJOR: on each pacing device: one leaf class per rate bin and copy, rate
 * = ceil = the bin's rate, burst 4 frames (the paper's token bucket). The program points a
 * socket's priority at the class of its pacing rate for the first window (HTB classifies by
 * skb->priority when it names one of its classes) and sets it back to 0 afterwards; other
 * traffic goes through HTB's direct queue unshaped. Bins: 8 per octave of bytes/s from
 * 2^SPAND_PACE_MIN_EXP, each at its lower edge (8 + m) << (e - 3), so a socket is paced at
 * most 12.5 % below its rate, never above it. Class minors are multiples of 16: the low
 * four bits of the priority, which pfifo_fast, mqprio and VLAN egress maps read, stay 0. */
#define SPAND_HTB_MAJOR 0x5350u
#define SPAND_PACE_MIN_EXP 13u /* 8 KiB/s: slower rates use the first bin */
#define SPAND_PACE_BINS (8u * (32u - SPAND_PACE_MIN_EXP))
#define SPAND_PACE_COPIES 4u /* concurrent first windows of one bin share a class 1 in 4 */
#define SPAND_PACE_BURST_FRAMES 2u

static inline spand_u32 spand_msb32(spand_u32 x) {
  spand_u32 n = 0;
  if (x >> 16) {
    n += 16;
    x >>= 16;
  }
  if (x >> 8) {
    n += 8;
    x >>= 8;
  }
  if (x >> 4) {
    n += 4;
    x >>= 4;
  }
  if (x >> 2) {
    n += 2;
    x >>= 2;
  }
  if (x >> 1) n += 1;
  return n;
}

/* The bin of a pacing rate (bytes/s): the highest bin whose rate is <= rate. */
static inline spand_u32 spand_pace_bin(spand_u32 rate) {
  spand_u32 e;
  if (rate < (1u << SPAND_PACE_MIN_EXP)) return 0;
  e = spand_msb32(rate);
  return (e - SPAND_PACE_MIN_EXP) * 8u + ((rate >> (e - 3u)) & 7u);
}

/* A bin's rate in bytes/s. */
static inline spand_u64 spand_pace_bin_rate(spand_u32 bin) {
  spand_u32 e = SPAND_PACE_MIN_EXP + bin / 8u;
  return (spand_u64)(8u + bin % 8u) << (e - 3u);
}

/* HTB class id (major:minor) of a bin and copy; also the socket priority that selects it. */
static inline spand_u32 spand_pace_classid(spand_u32 bin, spand_u32 copy) {
  return (SPAND_HTB_MAJOR << 16) | ((1u + bin * SPAND_PACE_COPIES + copy) << 4);
}

#define SPAND_MAX_PREFIXES 65536
#define SPAND_MAX_SOCKETS 65536

#endif
