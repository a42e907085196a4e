// The JSON Lines writer (capture/json_line.*, the collector's flow_json and sample_json) against
// nlohmann::json, which built the records before issue 16: the same bytes for random records
// (every field, edge values, IPv4 and IPv6 addresses), every md_ratio a uint16 can hold and a
// spread of larger ones, and every byte value in a string.
#include "capture/json_line.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "capture/collector.hpp"

namespace spand {
namespace {

using nlohmann::ordered_json;

// The reference: the writer as it was (gateway/capture/collector.cpp before issue 16).
ordered_json half_to_json(const HalfRecord& h) {
  ordered_json j;
  j["bytes"] = h.bytes;
  j["unique_bytes"] = h.unique_bytes;
  j["packets"] = h.packets;
  j["data_packets"] = h.data_packets;
  j["rexmt_packets"] = h.rexmt_packets;
  j["rexmt_fast"] = h.rexmt_fast;
  j["rexmt_timeout"] = h.rexmt_timeout;
  j["rexmt_spurious"] = h.rexmt_spurious;
  j["dsacks"] = h.dsacks;
  j["reordered_packets"] = h.reordered_packets;
  j["capture_dups"] = h.capture_dups;
  j["loss_events_fast"] = h.loss_events_fast;
  j["loss_events_timeout"] = h.loss_events_timeout;
  j["loss_flight_fast"] = h.loss_by_flight[0];
  j["loss_flight_timeout"] = h.loss_by_flight[1];
  j["timeout_wait_us"] = h.timeout_wait_us;
  j["rtt_count"] = h.rtt_count;
  j["rtt_min_us"] = h.rtt_count ? ordered_json(h.rtt_min_us) : ordered_json(nullptr);
  j["rtt_mean_us"] = h.rtt_count ? ordered_json(h.rtt_sum_us / h.rtt_count) : ordered_json(nullptr);
  j["rtt_max_us"] = h.rtt_count ? ordered_json(h.rtt_max_us) : ordered_json(nullptr);
  j["mss"] = h.mss;
  j["wscale"] = h.wscale == 0xff ? ordered_json(nullptr) : ordered_json(h.wscale);
  j["sack"] = h.sack_permitted;
  j["timestamps"] = h.timestamps;
  j["max_flight_segments"] = h.max_flight_segments;
  j["wc_count"] = h.wc_count;
  ordered_json wc = ordered_json::array();
  ordered_json lim = ordered_json::array();
  for (int i = 0; i < h.wc_kept; ++i) {
    wc.push_back(h.wc_segments[i]);
    lim.push_back(bool(h.wc_cwnd_limited_mask & (1u << i)));
  }
  j["wc_segments"] = wc;
  j["wc_cwnd_limited"] = lim;
  j["md_ratio"] = h.md_permille ? ordered_json(h.md_permille / 1000.0) : ordered_json(nullptr);
  j["sender"] = sender_kind_name(h.sender);
  j["first_data_ns"] = h.data_packets ? ordered_json(h.first_data_ns) : ordered_json(nullptr);
  j["last_data_ns"] = h.data_packets ? ordered_json(h.last_data_ns) : ordered_json(nullptr);
  return j;
}

ordered_json opt_us(int64_t v) {
  return v >= 0 ? ordered_json(v) : ordered_json(nullptr);
}

std::string ref_flow_json(const FlowRecord& f) {
  ordered_json j;
  j["client"] = addr_to_string(f.client);
  j["client_port"] = f.client_port;
  j["server"] = addr_to_string(f.server);
  j["server_port"] = f.server_port;
  j["ip_version"] = f.ip_version;
  j["vlan"] = f.vlan;
  j["handshake"] = f.handshake_seen;
  j["first_ts_ns"] = f.first_ns;
  j["last_ts_ns"] = f.last_ns;
  j["hs_rtt_us"] = opt_us(f.hs_rtt_us);
  j["syn_synack_us"] = opt_us(f.syn_synack_us);
  j["synack_ack_us"] = opt_us(f.synack_ack_us);
  // The server's data measures the path to the client; these summarize it.
  const HalfRecord& s = f.s2c;
  j["rtt_count"] = s.rtt_count;
  j["rtt_min_us"] = s.rtt_count ? ordered_json(s.rtt_min_us) : ordered_json(nullptr);
  j["rtt_mean_us"] = s.rtt_count ? ordered_json(s.rtt_sum_us / s.rtt_count) : ordered_json(nullptr);
  j["rtt_max_us"] = s.rtt_count ? ordered_json(s.rtt_max_us) : ordered_json(nullptr);
  // Tstat's server completion time: first to last data segment from the server.
  j["completion_time_us"] = s.data_packets ? ordered_json((s.last_data_ns - s.first_data_ns) / 1000)
                                           : ordered_json(nullptr);
  j["close_reason"] = close_reason_name(f.close);
  j["c2s"] = half_to_json(f.c2s);
  j["s2c"] = half_to_json(f.s2c);
  return j.dump();
}

std::string ref_sample_json(const Sample& s, const PrefixConfig& cfg) {
  ordered_json j;
  j["ts_ns"] = s.ts_ns;
  j["kind"] = s.kind == SampleKind::kWc         ? "wc"
              : s.kind == SampleKind::kDecrease ? "decrease"
                                                : "rtt";
  j["prefix"] = prefix_of(s.client, cfg).to_string();
  j["client"] = addr_to_string(s.client);
  j["client_port"] = s.client_port;
  j["server"] = addr_to_string(s.server);
  j["server_port"] = s.server_port;
  if (s.kind == SampleKind::kWc) {
    j["wc_segments"] = s.value;
    j["reason"] = wc_reason_name(s.wc_reason);
    j["cwnd_limited"] = s.cwnd_limited;
    j["sender"] = sender_kind_name(s.sender);
  } else if (s.kind == SampleKind::kDecrease) {
    j["md_ratio"] = s.value / 1000.0;
  } else {
    j["rtt_us"] = s.value;
    j["source"] = rtt_source_name(s.rtt_source);
  }
  j["origin"] = s.origin == SampleOrigin::kAgent ? "agent" : "gateway";
  return j.dump();
}

uint64_t edge(std::mt19937_64& rng) {
  static const uint64_t kEdges[] = {0, 1, 9, 10, 99, 100, 65535, 4294967295ull, UINT64_MAX};
  return rng() % 4 ? rng() >> (rng() % 64) : kEdges[rng() % 9];
}

IpAddr random_addr(std::mt19937_64& rng) {
  uint8_t b[16];
  for (auto& x : b) x = uint8_t(rng());
  switch (rng() % 5) {
    case 0:
    case 1:
      return IpAddr::from_v4(b);
    case 2:  // runs of zero groups: where :: goes
      for (int i = 0; i < 16; ++i) {
        if (rng() % 2) b[i] = 0;
      }
      return IpAddr::from_v6(b);
    case 3: {
      IpAddr a;  // all zero, or ::1-like
      a.bytes[15] = uint8_t(rng() % 2);
      return a;
    }
    default:
      return IpAddr::from_v6(b);
  }
}

HalfRecord random_half(std::mt19937_64& rng) {
  HalfRecord h;
  h.bytes = edge(rng);
  h.unique_bytes = edge(rng);
  h.packets = uint32_t(edge(rng));
  h.data_packets = rng() % 3 ? uint32_t(edge(rng)) : 0;
  h.rexmt_packets = uint32_t(edge(rng));
  h.rexmt_fast = uint32_t(edge(rng));
  h.rexmt_timeout = uint32_t(edge(rng));
  h.rexmt_spurious = uint32_t(edge(rng));
  h.dsacks = uint32_t(edge(rng));
  h.reordered_packets = uint32_t(edge(rng));
  h.capture_dups = uint32_t(edge(rng));
  h.loss_events_fast = uint32_t(edge(rng));
  h.loss_events_timeout = uint32_t(edge(rng));
  for (auto& by_class : h.loss_by_flight) {
    for (auto& n : by_class) n = uint16_t(rng());
  }
  h.timeout_wait_us = uint32_t(edge(rng));
  h.rtt_count = rng() % 3 ? uint32_t(edge(rng)) : 0;
  h.rtt_min_us = uint32_t(edge(rng));
  h.rtt_max_us = uint32_t(edge(rng));
  h.rtt_sum_us = edge(rng);
  h.mss = uint16_t(rng());
  h.wscale = rng() % 3 ? uint8_t(rng() % 15) : 0xff;
  h.sack_permitted = rng() % 2;
  h.timestamps = rng() % 2;
  h.max_flight_segments = uint16_t(rng());
  h.wc_count = uint8_t(rng());
  h.wc_kept = uint8_t(rng() % 7);
  for (auto& w : h.wc_segments) w = uint16_t(rng());
  h.wc_cwnd_limited_mask = uint8_t(rng());
  h.md_permille = rng() % 2 ? uint16_t(rng()) : 0;
  h.sender = SenderKind(rng() % kSenderKinds);
  h.first_data_ns = edge(rng);
  h.last_data_ns = edge(rng);
  return h;
}

TEST(JsonLine, FlowRecordsAreTheBytesNlohmannWrote) {
  std::mt19937_64 rng(16);
  for (int n = 0; n < 200'000; ++n) {
    FlowRecord f;
    f.client = random_addr(rng);
    f.server = random_addr(rng);
    f.client_port = uint16_t(rng());
    f.server_port = uint16_t(rng());
    f.ip_version = rng() % 2 ? 4 : 6;
    f.vlan = uint16_t(rng() % 4096);
    f.handshake_seen = rng() % 2;
    f.first_ns = edge(rng);
    f.last_ns = edge(rng);
    f.hs_rtt_us = rng() % 3 ? int64_t(edge(rng) >> 1) : -1;
    f.syn_synack_us = rng() % 3 ? int64_t(edge(rng) >> 1) : -1;
    f.synack_ack_us = rng() % 3 ? int64_t(edge(rng) >> 1) : -1;
    f.close = CloseReason(rng() % 5);
    f.c2s = random_half(rng);
    f.s2c = random_half(rng);
    ASSERT_EQ(flow_to_json(f), ref_flow_json(f)) << n;
  }
}

TEST(JsonLine, SampleRecordsAreTheBytesNlohmannWrote) {
  std::mt19937_64 rng(17);
  const PrefixConfig configs[] = {{24, 48}, {32, 128}, {1, 1}, {17, 61}};
  for (int n = 0; n < 200'000; ++n) {
    Sample s;
    s.ts_ns = edge(rng);
    s.client = random_addr(rng);
    s.server = random_addr(rng);
    s.client_port = uint16_t(rng());
    s.server_port = uint16_t(rng());
    const SampleKind kinds[] = {SampleKind::kWc, SampleKind::kRtt, SampleKind::kDecrease};
    s.kind = kinds[rng() % 3];
    s.origin = rng() % 2 ? SampleOrigin::kAgent : SampleOrigin::kGateway;
    s.wc_reason = WcReason(rng() % 4);
    s.rtt_source = RttSource(rng() % 4);
    s.cwnd_limited = rng() % 2;
    s.sender = SenderKind(rng() % kSenderKinds);
    s.value = uint32_t(edge(rng));
    const PrefixConfig& cfg = configs[rng() % 4];
    ASSERT_EQ(sample_to_json(s, cfg), ref_sample_json(s, cfg)) << n;
  }
}

TEST(JsonLine, EveryThousandthsValueIsTheDoubleNlohmannPrinted) {
  JsonLine j;
  auto check = [&](uint32_t v) {
    j.clear();
    j.thousandths(v);
    ASSERT_EQ(std::string(j.view()), ordered_json(v / 1000.0).dump()) << v;
  };
  for (uint32_t v = 0; v <= 1'100'000; ++v) check(v);
  for (uint64_t v = 1'100'000; v <= UINT32_MAX; v += 9973) check(uint32_t(v));
  check(UINT32_MAX);
}

TEST(JsonLine, StringsEscapeAsNlohmannDoes) {
  JsonLine j;
  std::string all;
  for (int c = 1; c < 128; ++c) {
    const std::string one(1, char(c));
    j.clear();
    j.str(one);
    EXPECT_EQ(std::string(j.view()), ordered_json(one).dump()) << c;
    all += one;
  }
  j.clear();
  j.str(all);
  EXPECT_EQ(std::string(j.view()), ordered_json(all).dump());
}

TEST(JsonLine, GrowsForLongText) {
  JsonLine j;
  const std::string big(100'000, 'x');
  j.str(big);
  j.str(big);
  EXPECT_EQ(j.size(), 200'004u);
  EXPECT_EQ(std::string(j.view()), ordered_json(big).dump() + ordered_json(big).dump());
}

}  // namespace
}  // namespace spand
