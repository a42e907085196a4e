#include "capture/collector.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace spand {

namespace {

// Every key below is written as a literal with its punctuation: the order is the documented one
// (docs/records.md), the same as when nlohmann::json built the objects.
// A half's RTT samples: count, then min, mean and max (null without a sample).
void rtt_json(JsonLine& j, const HalfRecord& h) {
  j.lit(",\"rtt_count\":");
  j.u64(h.rtt_count);
  if (h.rtt_count) {
    j.lit(",\"rtt_min_us\":");
    j.u64(h.rtt_min_us);
    j.lit(",\"rtt_mean_us\":");
    j.u64(h.rtt_sum_us / h.rtt_count);
    j.lit(",\"rtt_max_us\":");
    j.u64(h.rtt_max_us);
  } else {
    j.lit(",\"rtt_min_us\":null,\"rtt_mean_us\":null,\"rtt_max_us\":null");
  }
}

void half_json(JsonLine& j, const HalfRecord& h) {
  j.lit("{\"bytes\":");
  j.u64(h.bytes);
  j.lit(",\"unique_bytes\":");
  j.u64(h.unique_bytes);
  j.lit(",\"packets\":");
  j.u64(h.packets);
  j.lit(",\"data_packets\":");
  j.u64(h.data_packets);
  j.lit(",\"rexmt_packets\":");
  j.u64(h.rexmt_packets);
  j.lit(",\"rexmt_fast\":");
  j.u64(h.rexmt_fast);
  j.lit(",\"rexmt_timeout\":");
  j.u64(h.rexmt_timeout);
  j.lit(",\"rexmt_spurious\":");
  j.u64(h.rexmt_spurious);
  j.lit(",\"dsacks\":");
  j.u64(h.dsacks);
  j.lit(",\"reordered_packets\":");
  j.u64(h.reordered_packets);
  j.lit(",\"capture_dups\":");
  j.u64(h.capture_dups);
  j.lit(",\"loss_events_fast\":");
  j.u64(h.loss_events_fast);
  j.lit(",\"loss_events_timeout\":");
  j.u64(h.loss_events_timeout);
  j.lit(",\"loss_flight_fast\":[");
  for (int k = 0; k < kLossFlightClasses; ++k) {
    if (k) j.lit(",");
    j.u64(h.loss_by_flight[0][k]);
  }
  j.lit("],\"loss_flight_timeout\":[");
  for (int k = 0; k < kLossFlightClasses; ++k) {
    if (k) j.lit(",");
    j.u64(h.loss_by_flight[1][k]);
  }
  j.lit("],\"timeout_wait_us\":");
  j.u64(h.timeout_wait_us);
  rtt_json(j, h);
  j.lit(",\"mss\":");
  j.u64(h.mss);
  j.lit(",\"wscale\":");
  if (h.wscale == 0xff) {
    j.null();
  } else {
    j.u64(h.wscale);
  }
  j.lit(",\"sack\":");
  j.boolean(h.sack_permitted);
  j.lit(",\"timestamps\":");
  j.boolean(h.timestamps);
  j.lit(",\"max_flight_segments\":");
  j.u64(h.max_flight_segments);
  j.lit(",\"wc_count\":");
  j.u64(h.wc_count);
  j.lit(",\"wc_segments\":[");
  for (int i = 0; i < h.wc_kept; ++i) {
    if (i) j.lit(",");
    j.u64(h.wc_segments[i]);
  }
  j.lit("],\"wc_cwnd_limited\":[");
  for (int i = 0; i < h.wc_kept; ++i) {
    if (i) j.lit(",");
    j.boolean(h.wc_cwnd_limited_mask & (1u << i));
  }
  j.lit("],\"md_ratio\":");
  if (h.md_permille) {
    j.thousandths(h.md_permille);
  } else {
    j.null();
  }
  if (h.data_packets) {
    j.lit(",\"first_data_ns\":");
    j.u64(h.first_data_ns);
    j.lit(",\"last_data_ns\":");
    j.u64(h.last_data_ns);
  } else {
    j.lit(",\"first_data_ns\":null,\"last_data_ns\":null");
  }
  j.lit("}");
}

void opt_us(JsonLine& j, int64_t v) {
  if (v >= 0) {
    j.i64(v);
  } else {
    j.null();
  }
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

void flow_json(JsonLine& j, const FlowRecord& f) {
  j.lit("{\"client\":");
  j.addr(f.client);
  j.lit(",\"client_port\":");
  j.u64(f.client_port);
  j.lit(",\"server\":");
  j.addr(f.server);
  j.lit(",\"server_port\":");
  j.u64(f.server_port);
  j.lit(",\"ip_version\":");
  j.u64(f.ip_version);
  j.lit(",\"vlan\":");
  j.u64(f.vlan);
  j.lit(",\"handshake\":");
  j.boolean(f.handshake_seen);
  j.lit(",\"first_ts_ns\":");
  j.u64(f.first_ns);
  j.lit(",\"last_ts_ns\":");
  j.u64(f.last_ns);
  j.lit(",\"hs_rtt_us\":");
  opt_us(j, f.hs_rtt_us);
  j.lit(",\"syn_synack_us\":");
  opt_us(j, f.syn_synack_us);
  j.lit(",\"synack_ack_us\":");
  opt_us(j, f.synack_ack_us);
  // The server's data measures the path to the client; these summarize it.
  const HalfRecord& s = f.s2c;
  rtt_json(j, s);
  // Tstat's server completion time: first to last data segment from the server.
  j.lit(",\"completion_time_us\":");
  if (s.data_packets) {
    j.u64((s.last_data_ns - s.first_data_ns) / 1000);
  } else {
    j.null();
  }
  j.lit(",\"close_reason\":");
  j.str(close_reason_name(f.close));
  j.lit(",\"c2s\":");
  half_json(j, f.c2s);
  j.lit(",\"s2c\":");
  half_json(j, f.s2c);
  j.lit("}");
}

void sample_json(JsonLine& j, const Sample& s, const PrefixConfig& cfg) {
  j.lit("{\"ts_ns\":");
  j.u64(s.ts_ns);
  j.lit(",\"kind\":");
  j.str(s.kind == SampleKind::kWc ? "wc" : s.kind == SampleKind::kDecrease ? "decrease" : "rtt");
  j.lit(",\"prefix\":");
  const Prefix pre = prefix_of(s.client, cfg);
  j.prefix(pre.net, pre.len);
  j.lit(",\"client\":");
  j.addr(s.client);
  j.lit(",\"client_port\":");
  j.u64(s.client_port);
  j.lit(",\"server\":");
  j.addr(s.server);
  j.lit(",\"server_port\":");
  j.u64(s.server_port);
  if (s.kind == SampleKind::kWc) {
    j.lit(",\"wc_segments\":");
    j.u64(s.value);
    j.lit(",\"reason\":");
    j.str(wc_reason_name(s.wc_reason));
    j.lit(",\"cwnd_limited\":");
    j.boolean(s.cwnd_limited);
  } else if (s.kind == SampleKind::kDecrease) {
    j.lit(",\"md_ratio\":");
    j.thousandths(s.value);
  } else {
    j.lit(",\"rtt_us\":");
    j.u64(s.value);
    j.lit(",\"source\":");
    j.str(rtt_source_name(s.rtt_source));
  }
  if (s.origin == SampleOrigin::kAgent) {
    j.lit(",\"origin\":\"agent\"}");
  } else {
    j.lit(",\"origin\":\"gateway\"}");
  }
}

std::string flow_to_json(const FlowRecord& f) {
  JsonLine j;
  flow_json(j, f);
  return std::string(j.view());
}

std::string sample_to_json(const Sample& s, const PrefixConfig& cfg) {
  JsonLine j;
  sample_json(j, s, cfg);
  return std::string(j.view());
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
        line_.clear();
        sample_json(line_, s, opts_.prefix);
        if (!samples_failed_ && write_line(samples_, line_, samples_failed_, opts_.samples_path)) {
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
    line_.clear();
    flow_json(line_, r);
    if (!flows_failed_ && write_line(flows_, line_, flows_failed_, opts_.flows_path)) {
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

bool Collector::write_line(FILE* f, JsonLine& line, bool& failed, const std::string& path) {
  // Buffered: an error shows up here when the buffer is written out (or at flush()); the
  // records in a buffer that failed are counted as written, the loss is still reported. Only
  // this thread writes the outputs: no stdio lock per line.
  line.lit("\n");
  const std::string_view text = line.view();
  if (fwrite_unlocked(text.data(), 1, text.size(), f) == text.size()) return true;
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
