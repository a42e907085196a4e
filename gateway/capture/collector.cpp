#include "capture/collector.hpp"

#include <sys/stat.h>
#include <unistd.h>

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
  j.lit(",\"sender\":\"");
  j.raw(sender_kind_name(h.sender));
  j.lit("\"");
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
  // Records do not go through this stream's buffer (Collector::write_out() writes whole lines
  // with write()); what else goes to stdout is flushed before them.
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
    j.lit(",\"sender\":\"");
    j.raw(sender_kind_name(s.sender));
    j.lit("\"");
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
  for (Sink& s : sinks_) {
    if (s.file && s.file != stdout) std::fclose(s.file);
  }
}

bool Collector::open(std::string& error) {
  if (!opts_.flows_path.empty()) {
    if (!open_out(opts_.flows_path, sinks_[0].file, error)) return false;
    flows_out_ = &sinks_[0];
  }
  if (!opts_.samples_path.empty()) {
    if (opts_.samples_path == opts_.flows_path) {
      samples_out_ = flows_out_;  // both on stdout: one buffer keeps the records' order
    } else {
      if (!open_out(opts_.samples_path, sinks_[1].file, error)) return false;
      samples_out_ = &sinks_[1];
    }
  }
  for (Sink& s : sinks_) {
    if (!s.file) continue;
    s.buf = std::make_unique<char[]>(kBufferBytes);
    struct stat st {};
    s.regular = fstat(fileno(s.file), &st) == 0 && S_ISREG(st.st_mode);
  }
  last_write_ = std::chrono::steady_clock::now();
  return true;
}

void Collector::drain(Worker& w) {
  Sample s;
  while (w.samples().pop(s)) {
    if (s.kind != SampleKind::kNewConnection) {
      if (is_aggregated(s.kind))
        prefixes_[prefix_of(s.client, opts_.prefix)].add(s, opts_.client_key);
      if (samples_out_) {
        line_.clear();
        sample_json(line_, s, opts_.prefix);
        if (!samples_failed_ &&
            write_line(*samples_out_, line_, samples_failed_, opts_.samples_path)) {
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
    if (r.s2c.sender != SenderKind::kUnknown) {
      ++senders_[prefix_of(r.client, opts_.prefix, false)][size_t(r.s2c.sender)];
    }
    if (flow_hook_) flow_hook_(r);
    if (!flows_out_) continue;
    line_.clear();
    flow_json(line_, r);
    if (!flows_failed_ && write_line(*flows_out_, line_, flows_failed_, opts_.flows_path)) {
      ++flows_written_;
    } else {
      ++flows_lost_;
    }
  }
  // A reader following a file sees records within kFlushInterval while packets arrive (one
  // system call per interval, not per line as line buffering made it); a pipe's reader at once.
  if (sinks_[0].used + sinks_[1].used != 0) {
    const bool due = flush_each_drain_ || !(sinks_[0].regular && sinks_[1].regular) ||
                     std::chrono::steady_clock::now() - last_write_ >= kFlushInterval;
    if (due) flush();
  }
  if (tick_hook_) {
    if (std::find(seen_workers_.begin(), seen_workers_.end(), &w) == seen_workers_.end()) {
      seen_workers_.push_back(&w);
    }
    capture_now_ns_ = std::max(capture_now_ns_, w.now_ns());
    tick_hook_(capture_now_ns_, seen_workers_);
  }
}

bool Collector::write_line(Sink& s, JsonLine& line, bool& failed, const std::string& path) {
  // Buffered: an error shows up when the buffer is written out; the records in a buffer that
  // failed are counted as written, the loss is still reported. Only this thread writes.
  line.lit("\n");
  const std::string_view text = line.view();
  if (s.used + text.size() > kBufferBytes && !write_out(s, failed, path)) return false;
  if (text.size() > kBufferBytes) {  // never for a record (about 1.5 KB at most): write it alone
    const ssize_t n = ::write(fileno(s.file), text.data(), text.size());
    if (n == ssize_t(text.size())) return true;
    failed = true;
    std::fprintf(stderr, "spand-gateway: writing '%s': %s; no more records go there\n",
                 path.c_str(), std::strerror(n < 0 ? errno : EIO));
    return false;
  }
  std::memcpy(s.buf.get() + s.used, text.data(), text.size());
  s.used += text.size();
  return true;
}

bool Collector::write_out(Sink& s, bool& failed, const std::string& path) {
  // Text written to the same stream through stdio (stdout: the prefix summary) goes first.
  if (std::fflush(s.file) != 0 || std::ferror(s.file)) {
    failed = true;
    std::fprintf(stderr, "spand-gateway: writing '%s': %s; no more records go there\n",
                 path.c_str(), std::strerror(errno ? errno : EIO));
    return false;
  }
  // One write() per buffer; the buffer ends at a line's end, so every write() does.
  size_t done = 0;
  while (done < s.used) {
    const ssize_t n = ::write(fileno(s.file), s.buf.get() + done, s.used - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed = true;
      std::fprintf(stderr, "spand-gateway: writing '%s': %s; no more records go there\n",
                   path.c_str(), std::strerror(n < 0 ? errno : EIO));
      s.used = 0;
      return false;
    }
    done += size_t(n);
  }
  s.used = 0;
  return true;
}

void Collector::flush() {
  last_write_ = std::chrono::steady_clock::now();
  if (flows_out_ && !flows_failed_) write_out(*flows_out_, flows_failed_, opts_.flows_path);
  if (samples_out_ && !samples_failed_)
    write_out(*samples_out_, samples_failed_, opts_.samples_path);
}

}  // namespace spand
