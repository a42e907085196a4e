// libFuzzer target: the window reader's RESP decoder (gateway/estimates/resp_window.cpp) and the
// packed bucket values it adds up (add_bucket_value, gateway/estimates/redis_schema.cpp), on a
// receive buffer of replies as a Redis server (or anything answering on its port) could send.
// Properties: replies are decoded one after another until the bytes run out or are not RESP;
// each decoded reply consumes at least one byte and no more than remain; decoding a prefix of
// the buffer never decodes more than the whole buffer; the sums a window read accumulates are
// numbers (never NaN) and not negative; the W_c client table covers no more samples than the
// window has, keeps its ids ascending, and its median lies between its clients' means.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "estimates/resp_window.hpp"
#include "fuzz_check.hpp"

using namespace spand;

namespace {

// Decodes replies from [p, end) as the single-node window reader does; returns the bytes consumed.
size_t decode_all(const char* p, const char* end, size_t& replies) {
  const char* const begin = p;
  replies = 0;
  for (;;) {
    resp::Reply r;
    Accumulator acc;
    size_t used = 0;
    const resp::Parse s = resp::parse_reply(p, end, r, acc, used);
    if (s != resp::Parse::kDone) break;
    FUZZ_CHECK(used >= 1 && used <= size_t(end - p));
    if (r.type == resp::Reply::Type::kArray && !r.bad_value) {
      FUZZ_CHECK(!std::isnan(acc.wc_mean()) && !std::isnan(acc.rtt_mean_us()));
      FUZZ_CHECK(acc.wc_sum >= 0 && acc.wc_sumsq >= 0 && acc.rtt_sum_us >= 0);
      FUZZ_CHECK(acc.wc_client_samples <= acc.wc_count && acc.wc_client_n <= kWcClientSlots);
      uint64_t in_table = acc.wc_client_overflow;
      double lo = INFINITY, hi = 0;
      for (uint32_t i = 0; i < acc.wc_client_n; ++i) {
        FUZZ_CHECK(acc.wc_client[i].count > 0);
        FUZZ_CHECK(i == 0 || acc.wc_client[i - 1].id < acc.wc_client[i].id);
        in_table += acc.wc_client[i].count;
        const double mean = double(acc.wc_client[i].sum) / double(acc.wc_client[i].count);
        lo = std::min(lo, mean);
        hi = std::max(hi, mean);
      }
      FUZZ_CHECK(in_table == acc.wc_client_samples);
      if (acc.has_wc_client_median())
        FUZZ_CHECK(acc.wc_client_median() >= lo && acc.wc_client_median() <= hi);
    }
    p += used;
    ++replies;
  }
  return size_t(p - begin);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly the input's size: ASan sees any read past the receive buffer.
  const std::vector<char> buf(data, data + size);
  const char* const p = buf.data();
  size_t replies = 0;
  const size_t whole = decode_all(p, p + buf.size(), replies);
  // A reply cut short is incomplete, not something else: the first half decodes no further.
  size_t half_replies = 0;
  const size_t half = decode_all(p, p + buf.size() / 2, half_replies);
  FUZZ_CHECK(half <= whole && half_replies <= replies);
  return 0;
}
