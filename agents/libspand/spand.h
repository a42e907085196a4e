/* libspand: the server-side math of TCP/SPAND, as a C API that C and C++ callers link
 * (the estimate service and spand-agent). Definitions: DESIGN.md, "cwnd_opt" and "Pacing";
 * the derivation and the edge cases are written out in README, "libspand: cwnd_opt and pacing (C
 * API) and `spandctl cwnd`".
 *
 * All windows and transfer sizes are in segments of the connection's MSS. Every function is
 * pure: no allocation, no locks, no syscalls, safe to call from any thread and per connection.
 */
#ifndef SPAND_H
#define SPAND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. Functions that can fail return one of these; SPAND_OK is zero. */
enum {
  SPAND_OK = 0,
  SPAND_EINVAL = -1, /* an argument is out of its domain (NULL out, b = 0, W_c = 0, ...) */
  SPAND_ERANGE = -2  /* a value is too large to compute the result exactly */
};

/* Text for an error code; never NULL (unknown codes give "unknown error"). */
const char* spand_strerror(int err);

/* Which end the residual partial epoch has (DESIGN.md Eq. 2 or Eq. 3). */
enum {
  SPAND_LOSS_FREE = 0, /* Eq. 3: the partial epoch ends without a loss (the default) */
  SPAND_THEOREM2 = 1   /* Eq. 2: Theorem 2, the partial epoch may end in a loss */
};

/* Largest W_c accepted, so that m = W_c + 1 (Eq. 2's upper end) still fits in 32 bits. */
#define SPAND_WC_MAX_SEGMENTS 0xFFFFFFFEu
/* spand.v1 Watch: the most prefixes one WatchRequest may name (the service refuses more; the
 * agent watches at most this many). */
#define SPAND_MAX_WATCH_PREFIXES 1000u

/* Bits in spand_cwnd_result.flags: how the answer was reached, for logs and tests. */
enum {
  /* F is a positive multiple of F_E (residual 0): the transfer is whole epochs, so it starts
   * where Eq. 1's epoch starts, m = floor((W_c + 1) / 2), with no shift. */
  SPAND_CWND_WHOLE_EPOCHS = 1u << 0,
  /* Loss-free variant only: no m in [1, W_c] satisfies Eq. 3 (the residual is larger than a
   * loss-free ramp from 1 to W_c carries), so m comes from Eq. 2, which allows the loss. */
  SPAND_CWND_FALLBACK_THEOREM2 = 1u << 1,
  /* Eq. 2 gave m = W_c + 1 (the residual fits in the loss and recovery part alone); the
   * initial window is capped at W_c, the largest window the path is known to take. */
  SPAND_CWND_CAPPED_AT_WC = 1u << 2
};

typedef struct spand_cwnd_result {
  uint64_t epoch_segments;    /* F_E, Eq. 1 */
  uint64_t residual_segments; /* r = F mod F_E */
  uint32_t m;                 /* Eq. 3 (or Eq. 2); 0 only when F = 0 */
  uint32_t delta;             /* Eq. 4 shift; 0 when the shift is off or not applicable */
  uint32_t cwnd_opt;          /* the initial window to use: in [1, W_c] when F > 0, 0 when F = 0 */
  uint32_t flags;             /* SPAND_CWND_* bits */
} spand_cwnd_result;

/* The optimal initial congestion window for a transfer of `transfer_segments` segments over a
 * path whose congestion window at loss is `wc_segments` (W_c), with `b` segments acknowledged
 * per ACK (1, or 2 with delayed ACKs). `variant` is SPAND_LOSS_FREE or SPAND_THEOREM2; `shift`
 * non-zero applies Eq. 4 (cwnd_opt = m - Delta), zero gives cwnd_opt = m (capped at W_c).
 *
 * Returns SPAND_OK and fills *out, or:
 *   SPAND_EINVAL  out is NULL, wc_segments = 0 (no window estimate: use slow start), b = 0,
 *                 or variant is not one of the two above;
 *   SPAND_ERANGE  wc_segments > SPAND_WC_MAX_SEGMENTS, or F_E does not fit in 64 bits
 *                 (only for W_c near 2^32 with b >= 3).
 * transfer_segments = 0 is valid: nothing to send, every field except epoch_segments is 0.
 * O(1): closed-form sums and an integer square root, no loop over m. */
int spand_cwnd_opt(uint32_t wc_segments, uint64_t transfer_segments, uint32_t b, int variant,
                   int shift, spand_cwnd_result* out);

/* Segments needed to carry `bytes` with segments of `mss_bytes`: ceil(bytes / mss_bytes).
 * Returns 0 when mss_bytes = 0 (undefined) or bytes = 0. */
uint64_t spand_segments_for_bytes(uint64_t bytes, uint32_t mss_bytes);

/* Pacing of the initial window (DESIGN.md "Pacing"): a token bucket of this depth... */
#define SPAND_PACING_BUCKET_DEPTH_SEGMENTS 4u

/* ...filled at cwnd / srtt. In BITS per second: cwnd_segments * mss_bytes * 8 * 1e6 / srtt_us,
 * rounded down, saturating at UINT64_MAX. Returns 0 (no rate: do not pace) when cwnd_segments
 * or mss_bytes is 0, or srtt_us is not a finite number > 0. */
uint64_t spand_pacing_rate_bps(uint32_t cwnd_segments, uint32_t mss_bytes, double srtt_us);

/* The same rate in BYTES per second, the unit of Linux SO_MAX_PACING_RATE; same 0 cases. */
uint64_t spand_pacing_rate_bytes_per_s(uint32_t cwnd_segments, uint32_t mss_bytes, double srtt_us);

/* Per-socket hooks (spand_tune, spand_report) are not here: they live in spand_socket.h,
 * owned by spand-agent, so that this header stays pure math. */

#ifdef __cplusplus
}
#endif

#endif /* SPAND_H */
