// spand-agent configuration: a TOML file (toml++) overridden by command-line flags. Errors
// name the file and line. Keys and defaults: README, "spand-agent and libspand's socket hooks".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prefix.hpp"

namespace spand::agent {

enum class Mode { kAuto, kBpf, kRoute };

struct PortConfig {
  uint16_t port = 0;            // local (listening) port; 0 = any port without its own entry
  uint64_t response_bytes = 0;  // typical transfer size on this port, for cwnd_opt
  uint32_t acked_per_ack = 1;   // b: 1, or 2 with delayed ACKs
  bool enabled = true;
  bool tune = false;  // sockets of this port may get spand_tune requests
};

// How a W_c estimate becomes the first window (docs/DESIGN.md, "Rules the benefit lab chose").
enum class WindowRule : uint8_t {
  kPaper,   // the paper: cwnd_opt (Eq. 4), paced at cwnd_opt / mean RTT
  kRounds,  // never more rounds than the kernel's slow start; window up to the path's BDP;
            // paced at the measured bottleneck rate (PathRates) over the propagation RTT
};

struct PolicyConfig {
  uint32_t max_initial_cwnd = 64;      // segments; cap on any window the agent sets
  uint64_t min_samples = 3;            // fewer W_c samples: leave slow start alone
  double max_age_s = 300;              // older estimates are dropped (the paper's window S)
  bool skip_slow_start = true;         // ssthresh := initial window
  bool ca_emulate = true;              // after the first window, +1 segment per RTT (BPF mode)
  bool pace = true;                    // pace the first window at cwnd / srtt
  bool seed_syn_rto = true;            // SYN/SYN-ACK RTO from the RTT estimate (BPF mode)
  uint32_t mss_bytes = 1448;           // for transfer segments and the pacing rate
  std::string high_bdp_cc;             // congestion control for W_c >= high_bdp_wc_segments
  uint32_t high_bdp_wc_segments = 16;  // Scalable TCP's legacy window
  WindowRule window_rule = WindowRule::kRounds;
  uint32_t kernel_initial_cwnd = 10;  // the kernel default (IW10) that a window must beat
  bool share_concurrent = true;       // kRounds: first windows in flight share window and rate
  // kRounds, with share_concurrent: they share the rate only, each keeping the whole window
  // (paced at rate / n, n windows in flight carry what one at the full rate would). Off by default
  // (tests/lab/benefit/RESULTS.md: measured under 8 concurrent transfers).
  bool share_rate_only = false;
  // kRounds, with share_concurrent: where the host's usual concurrency leaves no window that
  // beats the kernel's (rule 6), keep the kernel's IW and slow start but pace the first window at
  // the measured rate (an HTB class on pace_devices spreads the IW the kernel sends unpaced)
  // instead of leaving the socket to the kernel (docs/DESIGN.md, rule 12).
  bool share_floor_paced = true;
  // ... and sent by this congestion control (only where the program paces it, and only if
  // listed in tcp_available_congestion_control; empty: unchanged). BBR does not cut its window
  // by 0.7 at the batch's first losses (docs/DESIGN.md, rule 12).
  std::string share_floor_cc = "bbr";
  // ... only for a socket whose handshake waited 2 ms or more in a queue (false: every one).
  bool share_floor_queued_only = true;
  // ... gated by rank instead: the first windows of this host that fit in the buffer's free room
  // go as the kernel's burst, the later ones are paced one after another (rule 12).
  bool share_floor_rank = true;
  // ... and the first of a batch sends the window it would get alone as one burst when that fits
  // the buffer's free room (rule 12).
  bool share_floor_burst = true;
  // kRounds, BPF mode: a handshake that waited in a standing queue cuts the first window to the
  // room the buffer has left (docs/DESIGN.md, rule 11).
  bool standing_queue = true;
  // Read delivery rate and min RTT from TCP_INFO of this host's connections (PathRates).
  bool path_rate = true;
  uint32_t path_rate_interval_ms = 20;
  double path_rate_window_s = 30;  // the max rate must let go of a path that changed
  double share_window_s =
      10;  // kRounds: how long the host's concurrency toward a prefix is remembered
};

struct AgentConfig {
  std::string config_path;
  std::string estimate_server;  // host:port of spand.v1 Estimates
  std::string estimates_file;   // static estimates (JSON) instead of the server
  // Transport security toward estimate_server (docs/api.md, "Security"): TLS when tls_ca is set
  // (the CA of the server's certificate), mutual TLS with tls_cert and tls_key; tls_server_name
  // when estimate_server is an address the certificate does not name. Read at start.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  std::string report_token_file;  // Report's bearer token (first line), for TCP_INFO samples
  Mode mode = Mode::kAuto;
  std::string cgroup_path;                      // empty: the cgroup2 mount found at start
  std::string metrics_listen = "0.0.0.0:9464";  // empty: no /metrics; reachable by a scraper
  std::string report_socket;                    // unix datagram socket for spand_report; empty: off
  // BPF mode: where the program's link and maps are pinned, on bpffs; one agent per directory.
  std::string pin_dir = "/sys/fs/bpf/spand";
  uint32_t prefix_len_v4 = 24;
  uint32_t prefix_len_v6 = 48;
  uint32_t refresh_interval_ms = 1000;
  uint32_t grpc_deadline_ms = 200;
  uint32_t kernel_hz = 0;      // 0: read CONFIG_HZ from the kernel config
  bool tune_outgoing = false;  // BPF: also connections this host opens (port-0 policy)
  // TCP_INFO sampling of connections accepted on the configured ports, sent through Report.
  bool sample_tcp_info = false;
  uint32_t sample_interval_ms = 200;
  uint32_t sample_max_sockets = 65536;  // per-socket table; sockets beyond it are counted, skipped
  // Register Scalable TCP (bpf/spand_scalable.bpf.c) as congestion control "spand_scalable"
  // while the agent runs; also implied by policy.high_bdp_cc = "spand_scalable".
  bool scalable = false;
  bool dry_run = false;
  // Devices on which HTB classes pace the whole first window (BPF mode; pacing_qdisc.hpp).
  // Empty: TCP's own pacing only, which leaves the first 10 segments unpaced.
  std::vector<std::string> pace_devices;
  std::vector<Prefix> static_prefixes;  // fetched whether or not connections are seen
  // Network-aware clustering: the gateways' CIDR list file (prefix_map.hpp); "" = the fixed
  // prefix_len_v4/v6 only.
  std::string prefix_map;
  std::vector<PortConfig> ports;
  PolicyConfig policy;

  // The port's entry, else the port-0 entry, else nullptr.
  const PortConfig* port(uint16_t p) const;
};

struct ConfigError {
  std::string message;  // "FILE:LINE: what is wrong" when it comes from the file
};

// Reads a TOML file into cfg. Returns the first error.
std::optional<ConfigError> load_config_file(const std::string& path, AgentConfig& cfg);
std::optional<ConfigError> load_config_string(const std::string& text, const std::string& name,
                                              AgentConfig& cfg);
// The configuration as TOML that load_config_string reads back to the same values
// (--print-config). dry_run and config_path are not configuration keys.
std::string config_to_toml(const AgentConfig& cfg);
// Checks the combination of values (after flags were applied).
std::optional<ConfigError> validate(const AgentConfig& cfg);

const char* mode_name(Mode m);
std::optional<Mode> parse_mode(const std::string& s);

}  // namespace spand::agent
