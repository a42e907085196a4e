// Client-side network of an address (IPv4 /24 and IPv6 /48 by default) and the per-prefix
// accumulator shared by --prefix-summary and the Redis writer.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/packet.hpp"
#include "dataplane/sample.hpp"
#include "dataplane/siphash.hpp"

namespace spand {

struct PrefixMapSource;

struct PrefixConfig {
  uint8_t v4_len = 24;
  uint8_t v6_len = 48;
  // Network-aware clustering (prefix_map.hpp): when set, an address's prefix is the longest of
  // the map that covers it, and the fixed lengths above only for addresses it does not cover.
  std::shared_ptr<PrefixMapSource> map;
};

struct Prefix {
  IpAddr net;       // address with host bits cleared
  uint8_t len = 0;  // prefix length in the address family's own terms (24 for IPv4 /24)
  bool operator==(const Prefix&) const = default;
  std::string to_string() const;  // "198.51.100.0/24", "2001:db8:1::/48"
};

// count_uncovered: count an address the map does not cover (PrefixMapSource::uncovered, which
// counts samples and queries; the flow records' per-prefix sender counts do not).
Prefix prefix_of(const IpAddr& addr, const PrefixConfig& cfg, bool count_uncovered = true);
// Prefix of an explicit length (v4 length for IPv4-mapped addresses).
Prefix prefix_with_len(const IpAddr& addr, uint8_t len);

// "198.51.100.7" or "2001:db8::1" (IPv4-mapped addresses print as IPv4). Text into a Prefix is
// parsed above the data plane, by the project's one parser (common/net/ip_prefix.hpp; the
// gateway's use of it: capture/prefix_parse.hpp).
std::string addr_to_string(const IpAddr& a);

struct PrefixHash {
  size_t operator()(const Prefix& p) const noexcept;
};

// Sums from which count, mean and standard deviation follow; adding two accumulators gives the
// accumulator of the union, which is what lets several gateways write into the same bucket.
// RTT histogram bins on a log scale, four per octave (edges 1, 1.25, 1.5, 1.75 times a power of
// two): bin 0 holds RTTs under 16 us, bin 1 + 4 (e - 4) + q the RTTs whose highest set bit is e
// and the next two bits q, up to the last bin (2^25 us = 33.6 s and above, the 60 s sample bound
// included). A sample's bin is within 25 % of it, so the window's median is too (within 16 us
// when it is under 16 us).
inline constexpr uint32_t kRttBins = 1 + 4 * (25 - 4) + 4;  // 89
inline constexpr uint32_t kRttBinFloorUs = 16;
uint32_t rtt_bin(uint32_t rtt_us);
// The lowest RTT of a bin (0 for bin 0), in microseconds.
uint32_t rtt_bin_low_us(uint32_t bin);

// The key of client ids: SipHash-2-4 of the address's 16 bytes. Every writer into one Redis
// (gateways, services taking Report) must use the same key, since the buckets' client tables
// are merged by id (gateway/estimates/README.md, "Client ids"); readers need none. Deployments
// set a secret one (--client-key-file): with the public key below, addresses whose ids are
// small can be chosen offline to take the table's places.
inline constexpr SipKey kPublicClientIdKey{0x5350414e44434c49ull, 0x454e542d49442d31ull};

// What writers compare to agree on the key without showing it: SipHash-2-4 of the fixed label
// kClientKeyFingerprintLabel under the key (a PRF: the fingerprint tells nothing of the key, and
// two keys share one with probability 2^-64). Stored in Redis by the first writer
// (docs/redis-schema.md, "The client id key's fingerprint").
inline constexpr const char* kClientKeyFingerprintLabel = "spand client id key fingerprint v1";
uint64_t client_key_fingerprint(const SipKey& key);

// W_c sums of one client address (client_id), for the robust W_c: the lower median of per-client
// means (Accumulator::wc_client_median).
struct WcClientSums {
  uint32_t id = 0;
  uint64_t count = 0;
  uint64_t sum = 0;  // W_c values are whole segments
};
// Clients kept per accumulator (per bucket in Redis, per window when read). The table keeps the
// clients with the smallest ids, a bottom-k sample: the table of a union is the smallest ids of
// the tables' union, whatever the order of merging and the number of writers (a client left out
// of one table had 16 smaller ids beside it, and they are in every union). 16 clients chosen by a
// hash are enough for a median; more would add 24 bytes each to every bucket update in memory.
inline constexpr uint32_t kWcClientSlots = 16;

// TCP Smart Framing's loss figures of a prefix (gateway/estimates/README.md, "Loss figures"): of
// the finished connections' server->client directions that carried data, how many, how many never
// had 4 segments in flight, and their loss events by recovery. From flow records, by the Redis
// writer; all 0 in buckets written before 2026-11-24 (no data, not "no loss").
struct LossFigures {
  uint64_t flows = 0;
  uint64_t never4 = 0;
  uint64_t fast = 0;     // loss events recovered by fast retransmit
  uint64_t timeout = 0;  // ... by a retransmission timeout
  void merge(const LossFigures& o) {
    flows += o.flows;
    never4 += o.never4;
    fast += o.fast;
    timeout += o.timeout;
  }
};

struct Accumulator {
  uint64_t wc_count = 0;
  double wc_sum = 0;
  double wc_sumsq = 0;
  uint64_t rtt_count = 0;
  double rtt_sum_us = 0;
  uint32_t rtt_min_us = UINT32_MAX;
  uint64_t newest_ts_ns = 0;
  // Distinct client addresses behind the W_c samples, as a 32-bit mask: bit client_bit(addr).
  // OR-ed across buckets; its popcount is a lower bound on the distinct clients (two clients
  // may share a bit, never one client two). Gates USE_ESTIMATE (min_clients).
  uint32_t wc_clients = 0;
  // RTT samples per rtt_bin, for a median that one forged or outlying sample cannot move (the
  // mean and the minimum above can). rtt_hist_count < rtt_count when some buckets were written
  // without a histogram (before 2026-11-24): then there is no median.
  std::array<uint32_t, kRttBins> rtt_hist{};
  uint64_t rtt_hist_count = 0;
  // Per-client W_c sums, ascending id, the first wc_client_n in use; the W_c samples of clients
  // beyond them in wc_client_overflow. wc_client_samples counts the W_c samples that went through
  // a table (sum of counts + overflow): below wc_count when some bucket of a window was written
  // without one (before 2026-11-24), and then there is no median.
  std::array<WcClientSums, kWcClientSlots> wc_client{};
  uint32_t wc_client_n = 0;
  uint64_t wc_client_overflow = 0;
  uint64_t wc_client_samples = 0;
  LossFigures loss;

  // A sample; a W_c sample's client goes into the table under its id with `key`.
  void add(const Sample& s, const SipKey& key);
  void add(const Sample& s) { add(s, kPublicClientIdKey); }
  void merge(const Accumulator& o);
  double wc_mean() const { return wc_count ? wc_sum / double(wc_count) : 0.0; }
  double wc_stddev() const;
  double rtt_mean_us() const { return rtt_count ? rtt_sum_us / double(rtt_count) : 0.0; }
  // The median RTT from rtt_hist (linear within the median's bin, never below rtt_min_us); 0 when
  // there are no RTT samples or not all of them have a bin.
  double rtt_median_us() const;
  // Adds `count` samples summing to `sum` of client `id` to the table (bottom-k: a client whose
  // id is above the 16 kept goes to wc_client_overflow, and a kept one it displaces with it).
  // Does not touch wc_client_samples: the caller counts the samples once.
  void add_wc_client(uint32_t id, uint64_t count, uint64_t sum);
  // merge() for the table alone: o's clients, overflow and wc_client_samples.
  void merge_wc_table(const Accumulator& o);
  // The robust W_c: each client's mean W_c, and of those the lower median (the middle one, the
  // smaller of the two middle ones for an even count). One client's samples weigh as one client
  // however many there are. With h honest clients and f forged ones the result stays between
  // honest clients' means (within f ranks of the honest lower median) unless f > h (to lift it
  // above every honest mean: the lower of two middles resists lifting) or f >= h (to pull it
  // below). Needs every W_c sample of the window in a table; otherwise (and with no W_c sample)
  // has_wc_client_median() is false and wc_client_median() 0.
  bool has_wc_client_median() const {
    return wc_count > 0 && wc_client_n > 0 && wc_client_samples == wc_count;
  }
  double wc_client_median() const;
  // Distinct W_c clients, a lower bound: the larger of the mask's bits and the table's clients
  // (one more when some were left out of it).
  uint32_t distinct_wc_clients() const {
    const uint32_t table = wc_client_n + (wc_client_overflow ? 1 : 0);
    return std::max(uint32_t(__builtin_popcount(wc_clients)), table);
  }
};

// The id of `addr` in Accumulator::wc_client: the top 32 bits of its keyed hash.
uint32_t client_id(const IpAddr& addr, const SipKey& key);
// The bit of `addr` in Accumulator::wc_clients: the top 5 bits of its id.
uint32_t client_bit(const IpAddr& addr, const SipKey& key);
// The same under kPublicClientIdKey (replays without a key, tests).
inline uint32_t client_id(const IpAddr& addr) {
  return client_id(addr, kPublicClientIdKey);
}
inline uint32_t client_bit(const IpAddr& addr) {
  return client_bit(addr, kPublicClientIdKey);
}

}  // namespace spand
