// Text for libspand's named error codes.
#include "spand.h"

extern "C" const char* spand_strerror(int err) {
  switch (err) {
    case SPAND_OK:
      return "success";
    case SPAND_EINVAL:
      return "invalid argument (W_c and b must be >= 1, variant loss-free or theorem2)";
    case SPAND_ERANGE:
      return "value out of range (W_c above SPAND_WC_MAX_SEGMENTS or F_E beyond 64 bits)";
    default:
      return "unknown error";
  }
}
