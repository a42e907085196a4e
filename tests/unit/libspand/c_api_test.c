/* spand.h compiles as C11 and links from C: the paper's worked example (b = 1, W_c = 10,
 * F = 11 gives m = 9, Delta = 4, cwnd_opt = 5; hand check in cwnd_opt_test.cpp). */
#include <stdio.h>

#include "spand.h"

int main(void) {
  spand_cwnd_result res;
  int rc = spand_cwnd_opt(10, 11, 1, SPAND_LOSS_FREE, 1, &res);
  if (rc != SPAND_OK) {
    fprintf(stderr, "spand_cwnd_opt: %s\n", spand_strerror(rc));
    return 1;
  }
  if (res.m != 9 || res.delta != 4 || res.cwnd_opt != 5 || res.epoch_segments != 66) {
    fprintf(stderr, "got m=%u delta=%u cwnd_opt=%u\n", (unsigned)res.m, (unsigned)res.delta,
            (unsigned)res.cwnd_opt);
    return 1;
  }
  if (spand_cwnd_opt(0, 11, 1, SPAND_LOSS_FREE, 1, &res) != SPAND_EINVAL) return 1;
  return 0;
}
