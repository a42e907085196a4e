#include "capture/collector.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace spand {

namespace {

using nlohmann::ordered_json;

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
  j["first_data_ns"] = h.data_packets ? ordered_json(h.first_data_ns) : ordered_json(nullptr);
  j["last_data_ns"] = h.data_packets ? ordered_json(h.last_data_ns) : ordered_json(nullptr);
  return j;
}

ordered_json opt_us(int64_t v) {
  return v >= 0 ? ordered_json(v) : ordered_json(nullptr);
}

bool open_out(const std::string& path, FILE*& f, std::string& error) {
  if (path.empty()) return true;
  f = path == "-" ? stdout : std::fopen(path.c_str(), "w");
  if (!f) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  // JSON Lines: each record reaches the file whole, so a reader following it while the gateway
  // runs (tail -f, a log shipper) never sees a cut line.
  std::setvbuf(f, nullptr, _IOLBF, 1 << 16);
  return true;
}

}  // namespace

std::string flow_to_json(const FlowRecord& f) {
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

std::string sample_to_json(const Sample& s, const PrefixConfig& cfg) {
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
  } else if (s.kind == SampleKind::kDecrease) {
    j["md_ratio"] = s.value / 1000.0;
  } else {
    j["rtt_us"] = s.value;
    j["source"] = rtt_source_name(s.rtt_source);
  }
  j["origin"] = s.origin == SampleOrigin::kAgent ? "agent" : "gateway";
  return j.dump();
}

Collector::Collector(const OutputOptions& opts) : opts_(opts) {}

Collector::~Collector() {
  // flush() has reported write errors; fclose of a file already flushed cannot lose data.
  if (flows_ && flows_ != stdout) std::fclose(flows_);
  if (samples_ && samples_ != stdout) std::fclose(samples_);
}

bool Collector::open(std::string& error) {
  return open_out(opts_.flows_path, flows_, error) && open_out(opts_.samples_path, samples_, error);
}

void Collector::drain(Worker& w) {
  Sample s;
  while (w.samples().pop(s)) {
    if (s.kind != SampleKind::kNewConnection) {
      if (is_aggregated(s.kind)) prefixes_[prefix_of(s.client, opts_.prefix)].add(s);
      if (samples_) {
        if (!samples_failed_ && write_line(samples_, sample_to_json(s, opts_.prefix),
                                           samples_failed_, opts_.samples_path)) {
          ++samples_written_;
        } else {
          ++samples_lost_;
        }
      }
    }
    if (hook_) hook_(s);
  }
  FlowRecord r;
  while (w.flows().pop(r)) {
    if (!flows_) continue;
    if (!flows_failed_ && write_line(flows_, flow_to_json(r), flows_failed_, opts_.flows_path)) {
      ++flows_written_;
    } else {
      ++flows_lost_;
    }
  }
  if (tick_hook_) {
    if (std::find(seen_workers_.begin(), seen_workers_.end(), &w) == seen_workers_.end()) {
      seen_workers_.push_back(&w);
    }
    capture_now_ns_ = std::max(capture_now_ns_, w.now_ns());
    tick_hook_(capture_now_ns_, seen_workers_);
  }
}

bool Collector::write_line(FILE* f, const std::string& line, bool& failed,
                           const std::string& path) {
  // Buffered: an error shows up here when the buffer is written out (or at flush()); the
  // records in a buffer that failed are counted as written, the loss is still reported.
  if (std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fputc('\n', f) != EOF)
    return true;
  failed = true;
  std::fprintf(stderr, "spand-gateway: writing '%s': %s; no more records go there\n", path.c_str(),
               std::strerror(errno));
  return false;
}

void Collector::flush() {
  auto flush_one = [](FILE* f, bool& failed, const std::string& path) {
    if (!f || failed) return;
    if (std::fflush(f) != 0 || std::ferror(f)) {
      failed = true;
      std::fprintf(stderr, "spand-gateway: writing '%s': %s\n", path.c_str(),
                   std::strerror(errno ? errno : EIO));
    }
  };
  flush_one(flows_, flows_failed_, opts_.flows_path);
  flush_one(samples_, samples_failed_, opts_.samples_path);
}

}  // namespace spand
