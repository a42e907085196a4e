#include "dataplane/prefix.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/prefix_map.hpp"

namespace spand {

Prefix prefix_with_len(const IpAddr& addr, uint8_t len) {
  Prefix p;
  p.net = addr;
  const bool v4 = addr.is_v4();
  p.len = uint8_t(std::min<unsigned>(len, v4 ? 32 : 128));
  const unsigned keep_bits = (v4 ? 96 : 0) + p.len;  // bits of the 128-bit form to keep
  // Clear the host bits: whole bytes past the prefix, then the partial byte.
  const unsigned full = keep_bits / 8;
  if (full < 16) {
    std::memset(p.net.bytes.data() + full, 0, 16 - full);
    if (keep_bits % 8)
      p.net.bytes[full] = uint8_t(addr.bytes[full] & (0xff << (8 - keep_bits % 8)));
  }
  return p;
}

Prefix prefix_of(const IpAddr& addr, const PrefixConfig& cfg, bool count_uncovered) {
  if (cfg.map) {
    const std::shared_ptr<const PrefixMap> m = cfg.map->current.load(std::memory_order_acquire);
    Prefix p;
    if (m && m->longest_match(addr, p)) return p;
    if (count_uncovered) cfg.map->uncovered.fetch_add(1, std::memory_order_relaxed);
  }
  return prefix_with_len(addr, addr.is_v4() ? cfg.v4_len : cfg.v6_len);
}

size_t PrefixHash::operator()(const Prefix& p) const noexcept {
  // Two 64-bit words and the length, mixed (splitmix64 finalizer): cheap enough for every sample.
  uint64_t h = p.net.word(0) * 0x9E3779B97F4A7C15ull ^ p.net.word(1) ^ (uint64_t(p.len) << 56);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return size_t(h ^ (h >> 31));
}

uint32_t client_id(const IpAddr& addr, const SipKey& key) {
  return uint32_t(siphash24(key, addr.bytes.data(), addr.bytes.size()) >> 32);
}

uint64_t client_key_fingerprint(const SipKey& key) {
  const char* label = kClientKeyFingerprintLabel;
  return siphash24(key, reinterpret_cast<const uint8_t*>(label), std::strlen(label));
}

uint32_t client_bit(const IpAddr& addr, const SipKey& key) {
  return client_id(addr, key) >> 27;  // 0..31
}

void Accumulator::add_wc_client(uint32_t id, uint64_t count, uint64_t sum) {
  uint32_t i = 0;
  while (i < wc_client_n && wc_client[i].id < id) ++i;
  if (i < wc_client_n && wc_client[i].id == id) {
    wc_client[i].count += count;
    wc_client[i].sum += sum;
    return;
  }
  if (i == kWcClientSlots) {  // above every kept id, table full
    wc_client_overflow += count;
    return;
  }
  if (wc_client_n == kWcClientSlots) {  // the largest kept id leaves
    wc_client_overflow += wc_client[kWcClientSlots - 1].count;
    --wc_client_n;
  }
  for (uint32_t j = wc_client_n; j > i; --j) wc_client[j] = wc_client[j - 1];
  wc_client[i] = WcClientSums{id, count, sum};
  ++wc_client_n;
}

void Accumulator::merge_wc_table(const Accumulator& o) {
  for (uint32_t i = 0; i < o.wc_client_n; ++i)
    add_wc_client(o.wc_client[i].id, o.wc_client[i].count, o.wc_client[i].sum);
  wc_client_overflow += o.wc_client_overflow;
  wc_client_samples += o.wc_client_samples;
}

double Accumulator::wc_client_median() const {
  if (!has_wc_client_median()) return 0.0;
  std::array<double, kWcClientSlots> means{};
  for (uint32_t i = 0; i < wc_client_n; ++i)
    means[i] = double(wc_client[i].sum) / double(wc_client[i].count);
  const uint32_t mid = (wc_client_n - 1) / 2;
  std::nth_element(means.begin(), means.begin() + mid, means.begin() + wc_client_n);
  return means[mid];
}

void Accumulator::add(const Sample& s, const SipKey& key) {
  if (s.kind == SampleKind::kWc) {
    const uint32_t id = client_id(s.client, key);
    wc_clients |= 1u << (id >> 27);  // client_bit
    add_wc_client(id, 1, s.value);
    ++wc_client_samples;
    ++wc_count;
    wc_sum += s.value;
    wc_sumsq += double(s.value) * s.value;
  } else if (s.kind == SampleKind::kRtt) {
    ++rtt_count;
    rtt_sum_us += s.value;
    rtt_min_us = std::min(rtt_min_us, s.value);
    ++rtt_hist[rtt_bin(s.value)];
    ++rtt_hist_count;
  } else {
    return;
  }
  newest_ts_ns = std::max(newest_ts_ns, s.ts_ns);
}

void Accumulator::merge(const Accumulator& o) {
  wc_count += o.wc_count;
  wc_sum += o.wc_sum;
  wc_sumsq += o.wc_sumsq;
  rtt_count += o.rtt_count;
  rtt_sum_us += o.rtt_sum_us;
  rtt_min_us = std::min(rtt_min_us, o.rtt_min_us);
  newest_ts_ns = std::max(newest_ts_ns, o.newest_ts_ns);
  wc_clients |= o.wc_clients;
  merge_wc_table(o);
  for (uint32_t i = 0; i < kRttBins; ++i) rtt_hist[i] += o.rtt_hist[i];
  rtt_hist_count += o.rtt_hist_count;
  loss.merge(o.loss);
}

uint32_t rtt_bin(uint32_t rtt_us) {
  if (rtt_us < kRttBinFloorUs) return 0;
  const uint32_t e = 31 - uint32_t(__builtin_clz(rtt_us));  // >= 4
  const uint32_t q = (rtt_us >> (e - 2)) & 3;
  return std::min(kRttBins - 1, 1 + 4 * (e - 4) + q);
}

uint32_t rtt_bin_low_us(uint32_t bin) {
  if (bin == 0) return 0;
  const uint32_t e = 4 + (bin - 1) / 4, q = (bin - 1) % 4;
  return (4 + q) << (e - 2);
}

double Accumulator::rtt_median_us() const {
  if (rtt_count == 0 || rtt_hist_count != rtt_count) return 0.0;
  // The middle sample's rank (the mean of the two middle ranks for an even count), placed
  // linearly within its bin; the last bin has no upper edge, its width is taken as the one
  // before it (x 1.25).
  const double target = double(rtt_hist_count) / 2.0;
  double below = 0;
  for (uint32_t b = 0; b < kRttBins; ++b) {
    const double n = rtt_hist[b];
    if (n == 0 || below + n < target) {
      below += n;
      continue;
    }
    const double lo = rtt_bin_low_us(b);
    const double hi = b + 1 < kRttBins ? rtt_bin_low_us(b + 1) : lo * 1.25;
    const double m = lo + (hi - lo) * (target - below) / n;
    return std::max(m, rtt_min_us == UINT32_MAX ? 0.0 : double(rtt_min_us));
  }
  return 0.0;
}

double Accumulator::wc_stddev() const {
  if (wc_count < 2) return 0.0;
  const double n = double(wc_count);
  const double var = (wc_sumsq - wc_sum * wc_sum / n) / (n - 1);  // sample variance
  return var > 0 ? std::sqrt(var) : 0.0;
}

}  // namespace spand
