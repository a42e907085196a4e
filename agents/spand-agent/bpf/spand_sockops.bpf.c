// SPDX-License-Identifier: GPL-2.0
/* spand sock_ops program: applies the agent's per-prefix policy (TCP/SPAND: initial window
 * cwnd_opt, ssthresh no higher, paced first window, SYN RTO seed) to TCP connections of the
 * cgroup it is attached to. Kernel mechanisms and their limits: README, "spand-agent and libspand's socket hooks". */
/* linux/bpf.h first: libbpf's helper declarations use its types. */
#include <linux/bpf.h>
#include <linux/tcp.h>
/* (separate block so that include sorting keeps the order) */
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "spand_maps.h"

/* From <sys/socket.h> and <netinet/tcp.h>, which do not compile for the BPF target. */
#define SPAND_AF_INET 2
#define SPAND_AF_INET6 10
#define SPAND_SOL_SOCKET 1
#define SPAND_SOL_TCP 6
#define SPAND_SO_MAX_PACING_RATE 47
#define SPAND_SO_PRIORITY 12
#define SPAND_TCP_CONGESTION 13
#define SPAND_TCP_CLOSE 7 /* BPF_TCP_CLOSE */
#define SPAND_CLAMP_UNLIMITED 0x7fffffff
#define SPAND_PACING_UNLIMITED (~0u)

/* The one kernel field read through BTF (CO-RE: libbpf relocates the offset against the
 * running kernel's BTF, /sys/kernel/btf/vmlinux). */
struct tcp_sock {
  __u32 snd_cwnd_clamp;
} __attribute__((preserve_access_index));
/* And the pacing rate the kernel uses now (min of its own and SO_MAX_PACING_RATE). */
struct sock {
  unsigned long sk_pacing_rate;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

/* Set by the agent before loading (read-only data: the verifier prunes the disabled paths).
 * A server agent tunes accepted connections; outgoing ones only when asked. */
const volatile __u32 spand_tune_outgoing = 0;
/* Whether tune_ports has entries (fixed at start): without, no lookup per connection. */
const volatile __u32 spand_have_tune_ports = 0;
/* Policies for port 0 (any local port) in prefix_policy, kept by the agent: while there are none,
 * a lookup that misses the socket's own port is not tried again for port 0. */
__u32 spand_any_port_policies = 0;
/* Whether the agent installed the HTB pacing classes (agent.pace_devices; spand_maps.h). */
const volatile __u32 spand_pace_htb = 0;
/* The agent's prefix lengths: prefix_active counts first windows per client network (unless the
 * policy names its own, SPAND_POLICY_OWN_NET). */
const volatile __u32 spand_v4_prefix_len = 24;
const volatile __u32 spand_v6_prefix_len = 48;
/* Time the first flight's ACK train of every connection (prefix_rate). */
const volatile __u32 spand_measure_trains = 0;

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, SPAND_MAX_PREFIXES);
  __type(key, struct spand_prefix_key);
  __type(value, struct spand_policy);
  __uint(map_flags, BPF_F_NO_PREALLOC);
} prefix_policy SEC(".maps");

/* spand_tune requests, keyed by socket cookie; consumed before the socket's first data. LRU:
 * a request for a socket that never sends cannot fill the map. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SPAND_MAX_SOCKETS);
  __type(key, __u64);
  __type(value, struct spand_policy);
} sock_tune SEC(".maps");

/* Local ports whose sockets may get a spand_tune request after accept(). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u16);
  __type(value, __u8);
} tune_ports SEC(".maps");

/* Socket-local storage: freed with the socket by the kernel, so no close callback, no
 * deletes and no shared hash on the connection path (BTF for it comes from the object). */
struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct spand_sock_state);
} sock_state SEC(".maps");

/* First windows in flight per client network (SPAND_POLICY_SHARE): up at apply, down when the
 * first window is acked or the socket closes before. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SPAND_MAX_PREFIXES);
  __type(key, struct spand_active_key);
  __type(value, __u32);
} prefix_active SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SPAND_MAX_PREFIXES);
  __type(key, struct spand_active_key);
  __type(value, struct spand_rate_reading);
} prefix_rate SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SPAND_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 stat) {
  __u64* v = bpf_map_lookup_elem(&stats, &stat);
  if (v) *v += 1;
}

static __always_inline void fill_addr(struct bpf_sock_ops* skops, struct spand_prefix_key* key) {
  if (skops->family == SPAND_AF_INET) {
    __u32 ip = skops->remote_ip4; /* network order */
    key->data[12] = 0xff;
    key->data[13] = 0xff;
    __builtin_memcpy(&key->data[14], &ip, 4);
  } else {
    __u32 w0 = skops->remote_ip6[0], w1 = skops->remote_ip6[1];
    __u32 w2 = skops->remote_ip6[2], w3 = skops->remote_ip6[3];
    __builtin_memcpy(&key->data[2], &w0, 4);
    __builtin_memcpy(&key->data[6], &w1, 4);
    __builtin_memcpy(&key->data[10], &w2, 4);
    __builtin_memcpy(&key->data[14], &w3, 4);
  }
}

/* The agent's fixed client network of the socket, in bits of the IPv4-mapped address. */
static __always_inline __u32 fixed_net_len(struct bpf_sock_ops* skops) {
  if (skops->family == SPAND_AF_INET)
    return 96 + (spand_v4_prefix_len > 32 ? 32 : spand_v4_prefix_len);
  return spand_v6_prefix_len > 128 ? 128 : spand_v6_prefix_len;
}

/* A network-order address word masked to the bits of a `len`-bit prefix that fall in it (the
 * word starts at bit `bit0`). */
static __always_inline __u32 mask_word(__u32 be, __u32 len, __u32 bit0) {
  __u32 keep = len <= bit0 ? 0 : (len - bit0 >= 32 ? 32 : len - bit0);

  return keep == 0 ? 0 : bpf_htonl(bpf_ntohl(be) & (0xffffffffu << (32 - keep)));
}

/* A client network as prefix_active's (and prefix_rate's) key: the client's IPv4-mapped address
 * masked to `len` bits (fixed_net_len, or a SPAND_POLICY_OWN_NET policy's net_len). Each
 * family's context fields are read in a branch of their own, at fixed offsets (the verifier
 * refuses a context pointer the compiler would step through the words). */
static __always_inline void net_key(struct bpf_sock_ops* skops, __u32 len,
                                    struct spand_active_key* k) {
  __u32 w[4];

  if (len > 128) len = 128;
  k->len = len;
  if (skops->family == SPAND_AF_INET) {
    __u32 ip = skops->remote_ip4;
    w[0] = 0;
    w[1] = 0;
    w[2] = mask_word(bpf_htonl(0xffffu), len, 64);
    w[3] = mask_word(ip, len, 96);
  } else {
    __u32 w0 = skops->remote_ip6[0], w1 = skops->remote_ip6[1];
    __u32 w2 = skops->remote_ip6[2], w3 = skops->remote_ip6[3];
    w[0] = mask_word(w0, len, 0);
    w[1] = mask_word(w1, len, 32);
    w[2] = mask_word(w2, len, 64);
    w[3] = mask_word(w3, len, 96);
  }
  __builtin_memcpy(&k->data[0], w, 16);
}

/* Rule 12 gated by rank (SPAND_POLICY_PACE_RANK, meaningful only with PACE_QUEUED): its first
 * windows count per host and the paced ones share one class (spand_maps.h). */
static __always_inline int rank_gated(__u32 flags) {
  return (flags & SPAND_POLICY_PACE_RANK) && (flags & SPAND_POLICY_PACE_QUEUED);
}

/* The network a socket with these policy flags (and net_len) counts in: the policy's own prefix
 * with SPAND_POLICY_OWN_NET, else the fixed one. Its sockets count up and down with the same key:
 * apply_policy keeps the flag and net_len of the policy it applied in the socket's state (a
 * shared window with its own network always has state), a socket counted without state (the
 * state callback's flag, counted_by_flag) has the fixed network. */
static __always_inline void count_key(struct bpf_sock_ops* skops, __u32 flags, __u32 net_len,
                                      struct spand_active_key* k) {
  __u32 len = (flags & SPAND_POLICY_OWN_NET) ? net_len : fixed_net_len(skops);

  /* Rule 12 by rank counts first windows per host: one key of length 0. */
  if (rank_gated(flags)) len = 0;
  net_key(skops, len, k);
}

/* One more first window toward a network; returns how many are in flight now. */
static __always_inline __u32 count_in(struct spand_active_key* k) {
  __u32 zero = 0;
  __u32* n;

  n = bpf_map_lookup_elem(&prefix_active, k);
  if (!n) {
    bpf_map_update_elem(&prefix_active, k, &zero, BPF_NOEXIST);
    n = bpf_map_lookup_elem(&prefix_active, k);
  }
  if (!n) return 1;
  return __sync_fetch_and_add(n, 1) + 1;
}

/* One first window fewer toward a network. */
static __always_inline void count_down_key(struct spand_active_key* k) {
  __u32* n = bpf_map_lookup_elem(&prefix_active, k);

  if (n && *n > 0) __sync_fetch_and_add(n, -1);
}

/* ... toward the socket's fixed network (a socket counted without state). */
static __always_inline void count_down(struct bpf_sock_ops* skops) {
  struct spand_active_key k = {};

  net_key(skops, fixed_net_len(skops), &k);
  count_down_key(&k);
}

/* The same for a socket whose state says it was counted (once). */
static __always_inline void count_out(struct bpf_sock_ops* skops, struct spand_sock_state* st) {
  struct spand_active_key k = {};

  if (!(st->flags & SPAND_STATE_COUNTED)) return;
  st->flags &= ~SPAND_STATE_COUNTED;
  count_key(skops, st->flags, st->net_len, &k);
  count_down_key(&k);
}

/* Without tune ports, the state callback is enabled on a socket only by apply_policy and only
 * for a shared window: on a socket without state (a first window without storage) it says the
 * socket is counted in prefix_active. The first window's end switches it off with the count. */
static __always_inline int counted_by_flag(struct bpf_sock_ops* skops) {
  return !spand_have_tune_ports && (skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_STATE_CB_FLAG);
}

/* A first flight's ACK train, toward the fixed network or, when the socket's policy has its own
 * network and that is the longer prefix, toward it (a reading then never spans two map prefixes;
 * a shorter policy prefix would fold the readings of its fixed networks into one maximum where
 * the agent keeps each, it credits them to the map prefix itself). A train that read the path
 * counts in rate_bytes_per_s; one of a flight spand paced whose ACKs came at its pacing
 * (`paced`) only says the path delivered at least `rate`, and is kept apart
 * (paced_rate_bytes_per_s). */
static __always_inline void record_train(struct bpf_sock_ops* skops, struct spand_sock_state* st,
                                         __u64 rate, int paced) {
  struct spand_active_key k = {};
  struct spand_rate_reading fresh = {};
  struct spand_rate_reading* r;
  __u32 len = fixed_net_len(skops);
  __u32 lower = rate > 0xffffffffull ? 0xffffffffu : (__u32)rate;

  if ((st->flags & SPAND_POLICY_OWN_NET) && st->net_len > len) len = st->net_len;
  net_key(skops, len, &k);
  r = bpf_map_lookup_elem(&prefix_rate, &k);
  if (!r) {
    if (paced) {
      fresh.paced_rate_bytes_per_s = lower;
    } else {
      fresh.rate_bytes_per_s = rate;
      fresh.trains = 1;
    }
    bpf_map_update_elem(&prefix_rate, &k, &fresh, BPF_NOEXIST);
    return;
  }
  if (paced) {
    if (lower > r->paced_rate_bytes_per_s) r->paced_rate_bytes_per_s = lower;
    return;
  }
  if (rate > r->rate_bytes_per_s) r->rate_bytes_per_s = rate;
  __sync_fetch_and_add(&r->trains, 1);
}

/* Whether the segment acknowledges new data (its acknowledgment number in *ack); a train step
 * does nothing on any other (duplicate or old ACK, no ACK). Read before any storage lookup. */
static __always_inline int train_ack(struct bpf_sock_ops* skops, __u32* ack) {
  void* data = (void*)(long)skops->skb_data;
  void* data_end = (void*)(long)skops->skb_data_end;
  struct tcphdr* th = data;

  if ((void*)(th + 1) > data_end || !th->ack) return 0;
  *ack = bpf_ntohl(th->ack_seq);
  return (__s32)(*ack - skops->snd_una) > 0;
}

/* One incoming segment of a socket whose first flight is timed (the program sees every
 * received header while the socket has BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG; RTT_CB comes
 * only once per round trip, so it cannot time a train). The acknowledgment number is read
 * from the segment itself: the callback runs before the kernel processes the ACK.
 *
 * The train's rate is the data acknowledged since the second ACK of data over the time since
 * it, read at each ACK that advances while the ACKs keep the train's pace; it is recorded when
 * the first flight (what was sent when its first ACK came) is acknowledged, if the span holds
 * 4 segments or more. The train ends at the previous ACK when an ACK comes more than an eighth
 * of the smoothed RTT after the one before (a new round, a delayed ACK on a fast path, the
 * recovery after a loss) or, once the train spans 2 segments, more than twice as late per byte
 * as its pace so far (the pace is not judged on the first 2 segments). Duplicate ACKs (a
 * loss) do not advance the train. */
static __always_inline void train_step(struct bpf_sock_ops* skops, struct spand_sock_state* st,
                                       __u32 ack) {
  __u64 now = bpf_ktime_get_ns();
  __u32 mss = skops->mss_cache ? skops->mss_cache : 1448;
  __u64 srtt_ns = (__u64)(skops->srtt_us >> 3) * 1000;

  if (st->train_t0_ns == 0) {
    /* The first ACK of data: the flight ends at what is sent now. A flight spand paced was sent
     * at the kernel's pacing rate of this moment (cwnd has not grown yet). */
    st->train_t0_ns = 1;
    st->train_end = skops->snd_nxt;
    st->train_pacing = 0;
    if ((st->flags & SPAND_STATE_PACED) && skops->sk) {
      struct tcp_sock* tp = bpf_skc_to_tcp_sock(skops->sk);
      if (tp) {
        unsigned long pr = ((struct sock*)tp)->sk_pacing_rate;
        st->train_pacing = pr > 0xffffffffUL ? 0xffffffffu : (__u32)pr;
      }
    }
    return;
  }
  if (st->train_t0_ns == 1) {
    /* The train starts at the second: a token bucket's burst lets a flight's first segments
     * through back to back, and the first gap (22 us, then 7.5 ms on a 1.6 Mbit/s path with a
     * 3 KB burst) read the rate 15 % high. */
    st->train_t0_ns = now;
    st->train_b0 = ack;
    st->train_last = ack;
    st->train_last_ns = now;
    return;
  }
  if (st->train_last_ns && now > st->train_t0_ns) {
    __u64 done = (__u32)((__u32)st->train_last - (__u32)st->train_b0);
    __u64 step = (__u32)(ack - (__u32)st->train_last);
    __u64 gap = now - st->train_last_ns;
    /* gap / step <= 2 x (last_ns - t0) / done, without division */
    int in_pace = done < 2 * (__u64)mss || gap * done <= 2 * (st->train_last_ns - st->train_t0_ns) * step;
    if (srtt_ns && gap * 8 > srtt_ns) in_pace = 0;
    if (!in_pace) {
      st->train_last_ns = 0; /* the train ended at the previous ACK */
    } else {
      __u64 span = done + step;
      if (span >= 4 * (__u64)mss)
        st->train_rate = span * 1000000000ull / (now - st->train_t0_ns);
      st->train_last = ack;
      st->train_last_ns = now;
    }
  }
  if ((__s32)(ack - st->train_end) < 0) return;
  if (st->train_rate && st->train_pacing &&
      st->train_rate * 5 >= (__u64)st->train_pacing * 4) {
    /* A flight paced by spand whose ACKs came at 80 % of its pacing or faster measured the
     * pacing, not the path: recorded, such trains held the rate at what spand paced at (76
     * KB/s on Scenario 3's 5.6 MB/s path, 21 segments at 1.2 x cwnd / srtt), and ACKs that
     * came in a clump read above it. One that came slower read the bottleneck and counts.
     * What it does say: the path still delivers the rate spand paced at. */
    record_train(skops, st, st->train_rate, 1);
    count(SPAND_STAT_TRAIN_OWN_PACE);
  } else if (st->train_rate) {
    record_train(skops, st, st->train_rate, 0);
    count(SPAND_STAT_TRAIN_RATED);
  }
  st->flags &= ~SPAND_STATE_TRAIN;
  bpf_sock_ops_cb_flags_set(skops,
                            skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG);
}

/* Puts a socket whose first window is paced at `rate` into the HTB class of that rate
 * (spand_maps.h). A socket that already has a priority of its own keeps it (and stays with the
 * kernel's pacing only). The copy within the bin comes from the remote port, so concurrent
 * first windows of one bin rarely share a token bucket; rule 12's windows paced by rank
 * (`serial`) all take the bin's first copy at the rate itself, one after another. */
static __always_inline void pace_class(struct bpf_sock_ops* skops, __u32 rate, int serial) {
  __u32 port = skops->remote_port;
  __u64 rate64;
  int prio = 0;

  if (bpf_getsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_PRIORITY, &prio, sizeof(prio)) || prio) {
    count(SPAND_STAT_PACE_SKIPPED);
    return;
  }
  port ^= port >> 16;
  /* The class runs 9-25 % faster than the kernel's pacing (a bin's rate is up to 12.5 % below
   * the rate asked for): it spreads the 10 segments the kernel sends unpaced, and its backlog
   * drains while the kernel paces the rest (a class slower than the kernel never drained). */
  rate64 = serial ? rate : (__u64)rate + (__u64)rate / 4;
  if (rate64 > 0xffffffffull) rate64 = 0xffffffffull;
  prio = (int)spand_pace_classid(spand_pace_bin((__u32)rate64),
                                 serial ? 0 : (port ^ (port >> 8)) % SPAND_PACE_COPIES);
  if (bpf_setsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_PRIORITY, &prio, sizeof(prio)) == 0)
    count(SPAND_STAT_PACE_CLASSED);
}

/* The first window is acked: out of the pacing class (only if it is still ours). */
static __always_inline void pace_unclass(struct bpf_sock_ops* skops) {
  int prio = 0;

  if (bpf_getsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_PRIORITY, &prio, sizeof(prio)) ||
      ((__u32)prio >> 16) != SPAND_HTB_MAJOR)
    return;
  prio = 0;
  if (bpf_setsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_PRIORITY, &prio, sizeof(prio)) == 0)
    count(SPAND_STAT_PACE_UNCLASSED);
}

/* The first window is acked: the socket leaves its pacing class once everything sent until
 * now is acked too, so nothing it sent through the class is still queued there when its next
 * segments take HTB's direct queue (they would overtake it: spurious retransmissions). */
static __always_inline void leave_class_later(struct bpf_sock_ops* skops,
                                              struct spand_sock_state* st) {
  st->flags |= SPAND_STATE_CLASSED;
  st->unclass_mark = skops->snd_nxt;
}

/* How far CLOCK_MONOTONIC_COARSE (bpf_ktime_get_coarse_ns: the monotonic time of the last
 * timekeeping update) may trail bpf_ktime_get_ns's CLOCK_MONOTONIC on a CPU that runs this
 * program. The kernel updates timekeeping every tick (4 ms at HZ=250); a stalled timekeeping CPU
 * (a preempted vCPU) is taken over after 5 stalled jiffies, and a CPU leaving idle updates it
 * first. One second is far beyond any of these. */
#define SPAND_COARSE_LAG_NS 1000000000ull

/* Whether a policy's deadline has passed: the agent that wrote it may be dead (SIGKILL leaves
 * the pinned link and map behind), and its estimate is then too old to apply. The coarse clock
 * decides alone while the deadline is more than SPAND_COARSE_LAG_NS ahead of it (the exact
 * clock then reads before the deadline too): it costs no clock-source read (rdtsc, which on
 * this program's connection path cost as much as the LPM lookup), and the answer is the exact
 * clock's. Within that last second of a policy the exact clock decides, as before. */
static __always_inline int expired(const struct spand_policy* p) {
  __u64 deadline = p->expires_ns;

  if (deadline == 0 || bpf_ktime_get_coarse_ns() + SPAND_COARSE_LAG_NS < deadline) return 0;
  if (bpf_ktime_get_ns() < deadline) return 0;
  count(SPAND_STAT_EXPIRED);
  return 1;
}

/* Policy for the socket's local port, else for port 0 (any port); an expired one is none. */
static __always_inline struct spand_policy* lookup_policy(struct bpf_sock_ops* skops) {
  struct spand_prefix_key key = {};
  struct spand_policy* pol;
  __u16 port_be = bpf_htons((__u16)skops->local_port);

  if (skops->family != SPAND_AF_INET && skops->family != SPAND_AF_INET6) return 0;
  count(SPAND_STAT_LOOKUPS);
  key.prefixlen = 16 + 128;
  fill_addr(skops, &key);
  __builtin_memcpy(&key.data[0], &port_be, 2);
  pol = bpf_map_lookup_elem(&prefix_policy, &key);
  if (pol && !expired(pol)) return pol;
  if (spand_any_port_policies == 0) return 0;
  key.data[0] = 0;
  key.data[1] = 0;
  pol = bpf_map_lookup_elem(&prefix_policy, &key);
  if (pol && !expired(pol)) return pol;
  return 0;
}

/* The socket is left to the kernel: its own initial window (the policy's floor), slow start,
 * no pacing, no clamp (rule 11's queue_left and a share at or under the kernel's window). */
static __always_inline void leave_to_kernel(const struct spand_policy* p, __u32* iw, __u64* rate,
                                            __u32* thresh, __u32* cwnd, __u32* flags) {
  *iw = p->min_cwnd_segments ? p->min_cwnd_segments : 1;
  *rate = 0;
  *thresh = 0;
  *cwnd = 0;
  *flags &= ~(SPAND_POLICY_SKIP_SS | SPAND_POLICY_CA_EMULATE);
}

/* What apply_policy leaves its caller: the callbacks the socket needs from now on (the caller
 * adds them to its own in one bpf_sock_ops_cb_flags_set) and, when it looked the socket's
 * storage up (`st_known`), what it found or created, so the caller does not look again. */
struct spand_applied {
  struct spand_sock_state* st;
  __u32 cb_flags;
  int st_known;
};

/* Applies a policy at establishment or before the first data. Copies what is needed on the
 * stack first: map values may be replaced by the agent meanwhile. */
static __always_inline void apply_policy(struct bpf_sock_ops* skops, const struct spand_policy* p,
                                         struct spand_applied* out) {
  __u32 iw = p->init_cwnd_segments;
  __u32 thresh = p->ssthresh_segments;
  __u32 cwnd = p->pacing_cwnd_segments;
  __u32 flags = p->flags;
  __u32 net_len = p->net_len;
  __u64 rate = p->pacing_rate_bytes_per_s;
  struct spand_active_key net = {};
  char cc[SPAND_CC_NAME_LEN];
  struct bpf_sock* sk;
  struct spand_sock_state* st;
  __u32 share = 0;
  int clamped = 0;
  int v;

  if (iw && (flags & SPAND_POLICY_PACE_QUEUED)) {
    /* Rule 12: the kernel's own start, its first window paced (and sent by the policy's
     * congestion control, BBR by default), only where the handshake waited in a queue (a bulk
     * flow keeps the buffer full: paced, fewer of the 8 starting together lose their whole
     * window). Into an empty buffer the burst costs nothing: the kernel's, congestion control
     * included. By rank instead (SPAND_POLICY_PACE_RANK): the first windows of this host that
     * fit in the buffer's free room go as the kernel's burst, the later ones are paced (the
     * handshake gate left half the batches whole, and their last four lost whole windows). */
    int paced;
    __u32 burst = 0;

    if (rank_gated(flags)) {
      count_key(skops, flags, net_len, &net);
      share = count_in(&net);
      /* The whole window as the first's burst only behind a queue (a long flow keeps the
       * buffer busy); into an empty buffer it took the room of other hosts' windows. */
      burst = spand_handshake_waited(skops->srtt_us >> 3, p->prop_rtt_us)
                  ? p->floor_burst_segments : 0;
      burst = spand_floor_window(share, iw, burst, skops->srtt_us >> 3,
                                 p->prop_rtt_us, p->queue_room_us, p->path_rate_bytes_per_s,
                                 skops->mss_cache);
      paced = burst == 0;
    } else {
      paced = spand_handshake_queued(skops->srtt_us >> 3, p->prop_rtt_us);
    }
    if (paced) {
      count(SPAND_STAT_FLOOR_PACED);
    } else {
      count(SPAND_STAT_FLOOR_LEFT);
      leave_to_kernel(p, &iw, &rate, &thresh, &cwnd, &flags);
      flags &= ~SPAND_POLICY_SET_CC;
      if (burst > iw) iw = burst;
    }
  }
  if (flags & SPAND_POLICY_SET_CC) {
    __builtin_memcpy(cc, p->cc_name, sizeof(cc));
    cc[SPAND_CC_NAME_LEN - 1] = 0;
    /* Before IW and the clamp: initialising a congestion control may reset ssthresh. */
    if (bpf_setsockopt(skops, SPAND_SOL_TCP, SPAND_TCP_CONGESTION, cc, sizeof(cc)))
      count(SPAND_STAT_CC_FAILED);
  }
  if (iw == 0) return;
  if (!(flags & SPAND_POLICY_PACE_QUEUED)) {
    /* Rule 11 (spand_queue_window): a handshake that waited in a standing queue gets the
     * window the rest of the buffer holds (two bottlenecks, a bulk flow filling the shared
     * buffer: windows of 21-29 segments lost when the handshake saw 24-35 ms of a 50 ms
     * buffer), or is left to the kernel when that saves no round. */
    __u32 fit = spand_queue_window(iw, skops->srtt_us >> 3, p->prop_rtt_us, p->queue_room_us,
                                   p->path_rate_bytes_per_s, skops->mss_cache,
                                   p->min_gain_segments, p->min_cwnd_segments);
    if (fit == 0) {
      leave_to_kernel(p, &iw, &rate, &thresh, &cwnd, &flags);
      if (spand_room_under(p->queue_room_us, p->path_rate_bytes_per_s, skops->mss_cache,
                           p->min_cwnd_segments)) {
        /* The buffer holds less than the kernel's own window: sent back to back it overflows
         * by itself, so the kernel's start is paced at the path's rate (as rule 12's). */
        count(SPAND_STAT_QUEUE_PACED);
        rate = p->path_rate_bytes_per_s;
      } else {
        count(SPAND_STAT_QUEUE_LEFT);
      }
    } else if (fit < iw) {
      count(SPAND_STAT_QUEUE_CUT);
      iw = fit;
      cwnd = 0; /* the lever was for a transfer that fits the window: it no longer does */
    }
  }
  if (flags & SPAND_POLICY_SHARE) {
    /* n first windows in flight toward this network share one window and one rate. A share
     * at or under the kernel's initial window leaves the socket to the kernel (IW10, slow
     * start, unpaced): the lab measured a paced IW10 with ssthresh 10 under 8-way contention
     * at 1.09 of default. The socket stays counted until its first window is acked. */
    count_key(skops, flags, net_len, &net);
    share = count_in(&net);
    if (share > 1 && (flags & SPAND_POLICY_SHARE_RATE)) {
      /* Each keeps the whole window, paced at its share of the rate. */
      count(SPAND_STAT_SHARED);
      rate /= share;
      cwnd /= share;
    } else if (share > 1) {
      count(SPAND_STAT_SHARED);
      iw /= share;
      rate /= share;
      thresh /= share;
      cwnd /= share;
      if (iw <= p->min_cwnd_segments) leave_to_kernel(p, &iw, &rate, &thresh, &cwnd, &flags);
    }
  }
  /* A larger cwnd only raises the kernel's pacing rate (ratio x cwnd / srtt) toward `rate`:
   * without a rate it would only send more at once. ssthresh is never under the cwnd. */
  if (!rate || cwnd < iw) cwnd = iw;
  if (thresh < cwnd) thresh = cwnd;
  v = (int)cwnd;
  if (bpf_setsockopt(skops, SPAND_SOL_TCP, TCP_BPF_IW, &v, sizeof(v))) {
    /* Data already left (TCP_BPF_IW needs data_segs_out == 0): leave the socket alone. */
    count(SPAND_STAT_IW_FAILED);
    if (share) count_down_key(&net);
    return;
  }
  if (flags & SPAND_POLICY_SKIP_SS) {
    /* The only ssthresh setter bpf_setsockopt has: the clamp sets ssthresh to the same value. */
    v = (int)thresh;
    if (bpf_setsockopt(skops, SPAND_SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &v, sizeof(v)))
      count(SPAND_STAT_CLAMP_FAILED);
    else
      clamped = 1;
  }
  if (rate) {
    /* Setting a finite SO_MAX_PACING_RATE also requests TCP-internal pacing (no fq here).
     * bpf_setsockopt takes it as a 32-bit int (bytes/s); ~0U means unlimited. */
    __u32 rate32 = rate >= SPAND_PACING_UNLIMITED ? SPAND_PACING_UNLIMITED - 1 : (__u32)rate;
    if (bpf_setsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_MAX_PACING_RATE, &rate32, sizeof(rate32)))
      count(SPAND_STAT_PACING_FAILED);
    else if (spand_pace_htb)
      pace_class(skops, rate32, rank_gated(flags));
  }
  if (!rate && !(flags & SPAND_POLICY_SKIP_SS) && !share) goto out;
  sk = skops->sk;
  if (!sk) {
    count(SPAND_STAT_STATE_FULL);
    if (share) count_down_key(&net);
    goto out;
  }
  if (rate && clamped && (flags & SPAND_POLICY_CA_EMULATE) && thresh == iw &&
      ((!share && !spand_measure_trains) || !spand_have_tune_ports) &&
      !(share && (flags & SPAND_POLICY_OWN_NET))) {
    /* The default policy (clamp, pacing, congestion avoidance emulated) needs no socket state
     * during the first window: on_ack reads the window back from the clamp. State is created
     * once the first window is acked, so a connection that ends within it allocates none.
     * (Only when the clamp is the first window: first_window_stateless reads it back.)
     * A socket that has state already (a spand_tune request after an establishment policy)
     * keeps using it. Without tune ports, a shared window is counted by the state callback's
     * flag (counted_by_flag), and a timed train's first ACK of data creates the state as it
     * would be here (train_state). A shared window counted in its policy's own network
     * (SPAND_POLICY_OWN_NET) keeps that network in state: the flag alone cannot say it. */
    st = bpf_sk_storage_get(&sock_state, sk, 0, 0);
  } else {
    st = bpf_sk_storage_get(&sock_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
    if (!st) {
      count(SPAND_STAT_STATE_FULL);
      if (share) count_down_key(&net);
      out->st_known = 1; /* none, and none could be made */
      goto out;
    }
  }
  out->st = st;
  out->st_known = 1;
  if (st) {
    st->phase = SPAND_PHASE_FIRST_WINDOW;
    st->flags = flags | (rate ? SPAND_STATE_PACED : 0) | (share ? SPAND_STATE_COUNTED : 0);
    st->first_window_bytes = skops->bytes_acked + (__u64)iw * skops->mss_cache;
    st->net_len = net_len;
  }
  out->cb_flags = BPF_SOCK_OPS_RTT_CB_FLAG | (share ? BPF_SOCK_OPS_STATE_CB_FLAG : 0);
out:
  count(SPAND_STAT_APPLIED);
}

/* The first window of a socket whose policy skips slow start, paces and emulates congestion
 * avoidance (apply_policy created no state for it). The clamp still holds the initial window:
 * nothing else sets it, and BBR, which resets ssthresh, leaves it alone. The first window ends
 * once iw * mss bytes are acked (a passive socket starts at bytes_acked 0; an active one
 * counts its SYN, one byte). The kernel calls back once per round trip (tcp_rtt_estimator),
 * so a first window acked within one round trip ends at the next callback, as with state. */
static __always_inline void first_window_stateless(struct bpf_sock_ops* skops,
                                                   struct bpf_sock* sk) {
  struct tcp_sock* tp = bpf_skc_to_tcp_sock(sk);
  struct spand_sock_state* st;
  __u32 unlimited = SPAND_PACING_UNLIMITED;
  __u32 iw;
  int v;

  if (!tp) return;
  iw = tp->snd_cwnd_clamp;
  if (skops->bytes_acked < (__u64)iw * skops->mss_cache) return;
  if (counted_by_flag(skops)) {
    count_down(skops);
    bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_STATE_CB_FLAG);
  }
  bpf_setsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_MAX_PACING_RATE, &unlimited, sizeof(unlimited));
  count(SPAND_STAT_PACING_LIFTED);
  /* The rest of the connection: the clamp raised once per round trip, which needs state. */
  st = bpf_sk_storage_get(&sock_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (st) {
    st->phase = SPAND_PHASE_AFTER;
    st->flags = SPAND_POLICY_SKIP_SS | SPAND_POLICY_CA_EMULATE;
    /* A train still timed (no ACK of data seen by the header callback yet) stays timed. */
    if (skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG)
      st->flags |= SPAND_STATE_TRAIN;
    st->raise_mark_snd_nxt = skops->snd_nxt;
    if (spand_pace_htb) leave_class_later(skops, st);
    return;
  }
  if (spand_pace_htb) pace_unclass(skops);
  /* No memory for the state: leave congestion control to the kernel from here on. */
  count(SPAND_STAT_STATE_FULL);
  v = SPAND_CLAMP_UNLIMITED;
  bpf_setsockopt(skops, SPAND_SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &v, sizeof(v));
  bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_RTT_CB_FLAG);
}

static __always_inline void on_ack(struct bpf_sock_ops* skops) {
  struct bpf_sock* sk = skops->sk;
  struct spand_sock_state* st;
  int v;

  if (!sk) return;
  st = bpf_sk_storage_get(&sock_state, sk, 0, 0);
  if (!st) {
    first_window_stateless(skops, sk);
    return;
  }
  if (st->phase == SPAND_PHASE_FIRST_WINDOW) {
    if (skops->bytes_acked < st->first_window_bytes) return;
    count_out(skops, st);
    if (st->flags & SPAND_STATE_PACED) {
      __u32 unlimited = SPAND_PACING_UNLIMITED;
      bpf_setsockopt(skops, SPAND_SOL_SOCKET, SPAND_SO_MAX_PACING_RATE, &unlimited,
                     sizeof(unlimited));
      if (spand_pace_htb) leave_class_later(skops, st);
      count(SPAND_STAT_PACING_LIFTED);
    }
    if ((st->flags & SPAND_POLICY_SKIP_SS) && (st->flags & SPAND_POLICY_CA_EMULATE)) {
      st->phase = SPAND_PHASE_AFTER;
      st->raise_mark_snd_nxt = skops->snd_nxt;
      return;
    }
    if (st->flags & SPAND_POLICY_SKIP_SS) {
      /* No emulation wanted: drop the clamp (this also lifts ssthresh: slow start resumes). */
      v = SPAND_CLAMP_UNLIMITED;
      bpf_setsockopt(skops, SPAND_SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &v, sizeof(v));
    }
    if (!(st->flags & SPAND_STATE_CLASSED))
      bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_RTT_CB_FLAG);
    st->phase = 0;
    return;
  }
  if ((st->flags & SPAND_STATE_CLASSED) && (__s32)(skops->snd_una - st->unclass_mark) >= 0) {
    pace_unclass(skops);
    st->flags &= ~SPAND_STATE_CLASSED;
    if (st->phase != SPAND_PHASE_AFTER)
      bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_RTT_CB_FLAG);
  }
  if (st->phase != SPAND_PHASE_AFTER) return;
  /* Congestion avoidance under the clamp: the kernel cannot grow cwnd past the clamp, and
   * raising the clamp also raises ssthresh, so raise both by one segment once per round trip
   * (Reno's additive increase) when cwnd sits at the clamp. */
  if ((__s32)(skops->snd_una - st->raise_mark_snd_nxt) < 0) return;
  if (skops->snd_cwnd < skops->snd_ssthresh) return;
  v = (int)skops->snd_cwnd + 1;
  if (bpf_setsockopt(skops, SPAND_SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &v, sizeof(v)) == 0)
    count(SPAND_STAT_CLAMP_RAISED);
  st->raise_mark_snd_nxt = skops->snd_nxt;
}

/* Before the first data of a socket on a tune port: apply a pending spand_tune request. */
static __always_inline void on_hdr_opt_len(struct bpf_sock_ops* skops) {
  __u64 cookie;
  struct spand_policy* t;
  struct spand_policy req;
  struct spand_applied applied = {};

  if (skops->data_segs_out > 0) {
    bpf_sock_ops_cb_flags_set(skops,
                              skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
    return;
  }
  cookie = bpf_get_socket_cookie(skops);
  t = bpf_map_lookup_elem(&sock_tune, &cookie);
  if (!t) return;
  __builtin_memcpy(&req, t, sizeof(req));
  bpf_map_delete_elem(&sock_tune, &cookie);
  bpf_sock_ops_cb_flags_set(skops,
                            skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
  /* A request carries the deadline of the policy it was computed from. */
  if (expired(&req)) return;
  /* An establishment policy may have counted the socket among the first windows in flight
   * (with tune ports a counted socket has state): the request's policy counts it again, so
   * the first count goes back first (else one count per tuned socket stayed for good). */
  if (skops->sk) {
    struct spand_sock_state* st = bpf_sk_storage_get(&sock_state, skops->sk, 0, 0);
    if (st) count_out(skops, st);
  }
  apply_policy(skops, &req, &applied);
  if (applied.cb_flags)
    bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | applied.cb_flags);
  count(SPAND_STAT_TUNE_APPLIED);
}

/* The state of a socket whose first flight is timed (PARSE_ALL_HDR_OPT_CB on since
 * establishment), at an ACK of data: the storage the socket has, else a new one marked for
 * the train, as establishment used to create it. Without memory the socket is no longer timed. */
static __always_inline struct spand_sock_state* train_state(struct bpf_sock_ops* skops,
                                                            struct bpf_sock* sk) {
  struct spand_sock_state* st = bpf_sk_storage_get(&sock_state, sk, 0, 0);
  struct tcp_sock* tp = 0;

  if (st) return st;
  /* The ack callback on a socket without state is a first window without storage
   * (apply_policy): its state is created as apply_policy would have, the window read back from
   * the clamp (first_window_stateless). */
  if (skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_RTT_CB_FLAG) {
    tp = bpf_skc_to_tcp_sock(sk);
    if (!tp) return 0;
  }
  st = bpf_sk_storage_get(&sock_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (!st) {
    count(SPAND_STAT_STATE_FULL);
    bpf_sock_ops_cb_flags_set(
        skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG);
    return 0;
  }
  st->flags = SPAND_STATE_TRAIN;
  if (tp) {
    st->phase = SPAND_PHASE_FIRST_WINDOW;
    st->flags |= SPAND_POLICY_SKIP_SS | SPAND_POLICY_CA_EMULATE | SPAND_STATE_PACED |
                 (counted_by_flag(skops) ? SPAND_STATE_COUNTED : 0);
    st->first_window_bytes = (__u64)tp->snd_cwnd_clamp * skops->mss_cache;
  }
  return st;
}

SEC("sockops")
int spand_sockops(struct bpf_sock_ops* skops) {
  struct spand_policy* pol;
  __u64 cookie;

  switch (skops->op) {
    case BPF_SOCK_OPS_TIMEOUT_INIT:
      /* SYN (active, a full socket) or SYN-ACK (passive, a request socket) timeout, jiffies. */
      if (!spand_tune_outgoing && skops->is_fullsock) {
        skops->reply = -1;
        return 1;
      }
      pol = lookup_policy(skops);
      if (pol && pol->syn_rto_jiffies) {
        skops->reply = pol->syn_rto_jiffies;
        count(SPAND_STAT_RTO_SEEDED);
        return 1;
      }
      skops->reply = -1;
      return 1;
    case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
      if (!spand_tune_outgoing) break;
      /* fall through */
    case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: {
      __u16 lport = (__u16)skops->local_port;
      /* The callbacks the socket needs are gathered and set once, at the end. */
      struct spand_applied applied = {};
      pol = lookup_policy(skops);
      if (pol) apply_policy(skops, pol, &applied);
      if (spand_measure_trains && skops->sk) {
        /* Timed from the first ACK of data on, which creates the storage if the socket has
         * none (train_state): a connection that ends before it allocates nothing. A socket
         * with state already (its policy's) is marked in it now (apply_policy's lookup, when
         * it made one, is the answer: nothing since could create storage). */
        struct spand_sock_state* st = applied.st_known
                                          ? applied.st
                                          : bpf_sk_storage_get(&sock_state, skops->sk, 0, 0);
        if (st) st->flags |= SPAND_STATE_TRAIN;
        count(SPAND_STAT_TRAIN_TIMED);
        applied.cb_flags |= BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG;
      }
      if (spand_have_tune_ports && bpf_map_lookup_elem(&tune_ports, &lport))
        applied.cb_flags |= BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG;
      if (applied.cb_flags)
        bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | applied.cb_flags);
      break;
    }
    case BPF_SOCK_OPS_PARSE_HDR_OPT_CB: {
      __u32 ack;
      if (skops->sk && train_ack(skops, &ack)) {
        struct spand_sock_state* st = train_state(skops, skops->sk);
        if (st && (st->flags & SPAND_STATE_TRAIN)) train_step(skops, st, ack);
      }
      break;
    }
    case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
      on_hdr_opt_len(skops);
      break;
    case BPF_SOCK_OPS_RTT_CB:
      on_ack(skops);
      break;
    case BPF_SOCK_OPS_STATE_CB:
      /* Tune-port sockets: drop an unused spand_tune request. Counted sockets: a first window
       * that ends with the connection leaves prefix_active. */
      if (skops->args[1] == SPAND_TCP_CLOSE) {
        struct spand_sock_state* st = skops->sk ? bpf_sk_storage_get(&sock_state, skops->sk, 0, 0)
                                                : 0;
        if (st)
          count_out(skops, st);
        else if (counted_by_flag(skops))
          count_down(skops); /* a shared first window without storage */
        /* Only a tune port's socket can have its request consumed (HDR_OPT_LEN is enabled on
         * those alone): without tune ports the delete (an LRU bucket lock, about a third of
         * this callback) has nothing to do. */
        if (spand_have_tune_ports) {
          cookie = bpf_get_socket_cookie(skops);
          bpf_map_delete_elem(&sock_tune, &cookie);
        }
      }
      break;
    default:
      break;
  }
  return 1;
}
