#include "command_line.hpp"

#include <getopt.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "exit_codes.hpp"

namespace spand::agent {

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "Usage: spand-agent [options]\n"
      "  -c, --config FILE          TOML configuration (installed example: /etc/spand/agent.toml)\n"
      "  -s, --server HOST:PORT     spand.v1 estimate service\n"
      "      --tls-ca FILE          TLS to the service: the CA (PEM) of its certificate\n"
      "      --tls-cert FILE        mutual TLS: this agent's certificate (PEM), with --tls-key\n"
      "      --tls-key FILE         mutual TLS: its private key (PEM)\n"
      "      --tls-server-name NAME the name in the service's certificate, when --server is an\n"
      "                             address it does not carry\n"
      "      --report-token-file F  Report's bearer token (first line), for --sample-tcp-info\n"
      "  -f, --estimates-file FILE  static estimates (JSON) instead of the service\n"
      "  -m, --mode bpf|route|auto  how to apply (default auto: bpf, else route)\n"
      "  -g, --cgroup PATH          cgroup v2 directory for the sock_ops program\n"
      "      --pin-dir DIR          bpffs directory for the program's pins (default\n"
      "                             /sys/fs/bpf/spand); one agent per directory\n"
      "  -p, --port PORT:BYTES[:B]  a listening port, its typical response size, b (repeat)\n"
      "  -P, --prefix CIDR          a client prefix to fetch without waiting for a connection\n"
      "      --max-initial-cwnd N   cap on any initial window (segments, default 64)\n"
      "      --min-samples N        fewer W_c samples: slow start (default 3)\n"
      "      --metrics-listen ADDR:PORT  /metrics listener (default 0.0.0.0:9464; '' = off)\n"
      "      --prefix-len-v4 N      client prefix length for IPv4 (default 24; as the service)\n"
      "      --prefix-len-v6 N      client prefix length for IPv6 (default 48)\n"
      "      --prefix-map FILE      network-aware clustering: clients keyed by the longest\n"
      "                             prefix of this CIDR list (the gateways' file) that covers\n"
      "                             them; re-read when it changes\n"
      "      --report-socket PATH   unix datagram socket for spand_report ('' = off)\n"
      "      --sample-tcp-info      report W_c and RTT samples from the TCP_INFO of connections\n"
      "                             on the configured ports (needs --server)\n"
      "      --sample-interval-ms N between two sock_diag dumps (default 200)\n"
      "      --pace-device DEV      pace whole first windows with HTB classes on DEV (repeat;\n"
      "                             BPF mode; replaces DEV's default root qdisc while running)\n"
      "      --window-rule RULE     how W_c becomes a first window: 'rounds' (default: never more\n"
      "                             rounds than IW10 slow start, window up to the path's BDP,\n"
      "                             paced at the measured rate) or 'paper' (Eq. 4, cwnd/srtt)\n"
      "      --dry-run              print what would be applied; change nothing\n"
      "      --once                 one refresh, then exit (removing what was applied)\n"
      "      --print-config         print the effective configuration (the file, then the\n"
      "                             flags) as TOML that --config reads back, and exit\n"
      "      --version              print the version and the libraries' versions, and exit\n"
      "  -h, --help\n"
      "\n"
      "Exit status:\n"
      "  0  stopped by SIGTERM or SIGINT, or --once done; everything applied removed\n"
      "  2  bad usage or configuration (an unknown option, a value out of range, FILE:LINE)\n"
      "  3  runtime error (BPF load or attach, rtnetlink, the metrics port, ...)\n"
      "  6  busy: another agent holds the pin directory or a pacing device\n"
      "  7  missing privileges (the capabilities are named on stderr)\n"
      "The numbers mean the same in every spand binary (docs/exit-status.md).\n");
}

// PORT:BYTES[:B] with the config file's ranges (port 0..65535, response_bytes 1..2^63-1, b 1..2).
// Each field is whole decimal digits: sscanf's %llu took "80:-5" as 2^64-5 bytes and ignored
// anything after the numbers.
bool parse_port_flag(const std::string& s, PortConfig& pc) {
  auto field = [](std::string_view text, uint64_t lo, uint64_t hi, uint64_t& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size() && out >= lo &&
           out <= hi;
  };
  const std::string_view text(s);
  const size_t c1 = text.find(':');
  if (c1 == std::string_view::npos) return false;
  const size_t c2 = text.find(':', c1 + 1);
  const std::string_view b_text = c2 == std::string_view::npos ? "1" : text.substr(c2 + 1);
  uint64_t port = 0, bytes = 0, b = 0;
  if (!field(text.substr(0, c1), 0, 65535, port) ||
      !field(
          text.substr(c1 + 1, c2 == std::string_view::npos ? std::string_view::npos : c2 - c1 - 1),
          1, INT64_MAX, bytes) ||
      !field(b_text, 1, 2, b))
    return false;
  pc.port = static_cast<uint16_t>(port);
  pc.response_bytes = bytes;
  pc.acked_per_ack = b;
  return true;
}

std::optional<int> parse_command_line(int argc, char** argv, CommandLine& out) {
  AgentConfig& cfg = out.cfg;
  std::string config_path;
  // Flags win over the file: collect them first, apply after loading it.
  std::vector<std::pair<int, std::string>> flags;
  bool print_config = false;
  enum {
    kMaxCwnd = 1000,
    kMinSamples,
    kMetrics,
    kReportSocket,
    kDryRun,
    kOnce,
    kSampleTcpInfo,
    kSampleIntervalMs,
    kPaceDevice,
    kWindowRule,
    kPrefixLenV4,
    kPrefixLenV6,
    kPrintConfig,
    kVersion,
    kTlsCa,
    kTlsCert,
    kTlsKey,
    kTlsServerName,
    kReportTokenFile,
    kPinDir,
    kPrefixMap
  };
  static const option opts[] = {
      {"config", required_argument, nullptr, 'c'},
      {"server", required_argument, nullptr, 's'},
      {"estimates-file", required_argument, nullptr, 'f'},
      {"mode", required_argument, nullptr, 'm'},
      {"cgroup", required_argument, nullptr, 'g'},
      {"pin-dir", required_argument, nullptr, kPinDir},
      {"port", required_argument, nullptr, 'p'},
      {"prefix", required_argument, nullptr, 'P'},
      {"max-initial-cwnd", required_argument, nullptr, kMaxCwnd},
      {"min-samples", required_argument, nullptr, kMinSamples},
      {"metrics-listen", required_argument, nullptr, kMetrics},
      {"metrics", required_argument, nullptr, kMetrics},  // the name before 0.1.0's unification
      {"prefix-len-v4", required_argument, nullptr, kPrefixLenV4},
      {"prefix-len-v6", required_argument, nullptr, kPrefixLenV6},
      {"prefix-map", required_argument, nullptr, kPrefixMap},
      {"print-config", no_argument, nullptr, kPrintConfig},
      {"version", no_argument, nullptr, kVersion},
      {"report-socket", required_argument, nullptr, kReportSocket},
      {"sample-tcp-info", no_argument, nullptr, kSampleTcpInfo},
      {"sample-interval-ms", required_argument, nullptr, kSampleIntervalMs},
      {"pace-device", required_argument, nullptr, kPaceDevice},
      {"window-rule", required_argument, nullptr, kWindowRule},
      {"tls-ca", required_argument, nullptr, kTlsCa},
      {"tls-cert", required_argument, nullptr, kTlsCert},
      {"tls-key", required_argument, nullptr, kTlsKey},
      {"tls-server-name", required_argument, nullptr, kTlsServerName},
      {"report-token-file", required_argument, nullptr, kReportTokenFile},
      {"dry-run", no_argument, nullptr, kDryRun},
      {"once", no_argument, nullptr, kOnce},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int c;
  optind = 0;  // from the first argument, also on a second call (tests)
  while ((c = getopt_long(argc, argv, "c:s:f:m:g:p:P:h", opts, nullptr)) != -1) {
    switch (c) {
      case 'c':
        config_path = optarg;
        break;
      case 'h':
        usage(stdout);
        return kExitOk;
      case kDryRun:
        cfg.dry_run = true;
        break;
      case kOnce:
        out.once = true;
        break;
      case kPrintConfig:
        print_config = true;
        break;
      case kVersion:
        out.version = true;
        return kExitOk;
      case kSampleTcpInfo:
        flags.emplace_back(c, "");
        break;
      case '?':
        usage(stderr);
        return kExitUsage;
      default:
        flags.emplace_back(c, optarg);
        break;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "spand-agent: unexpected argument '%s'\n", argv[optind]);
    return kExitUsage;
  }
  if (!config_path.empty()) {
    if (auto err = load_config_file(config_path, cfg)) {
      std::fprintf(stderr, "spand-agent: %s\n", err->message.c_str());
      return kExitUsage;
    }
  }
  bool pace_devices_from_flags = false;
  for (auto& [flag, val] : flags) {
    switch (flag) {
      case kWindowRule:
        if (val == "paper") {
          cfg.policy.window_rule = WindowRule::kPaper;
        } else if (val == "rounds") {
          cfg.policy.window_rule = WindowRule::kRounds;
        } else {
          std::fprintf(stderr, "spand-agent: --window-rule '%s': expected rounds or paper\n",
                       val.c_str());
          return kExitUsage;
        }
        break;
      case kPaceDevice:
        if (!pace_devices_from_flags) cfg.pace_devices.clear();  // flags replace the file's list
        pace_devices_from_flags = true;
        if (val.empty() || val.size() >= 16) {
          std::fprintf(stderr, "spand-agent: --pace-device '%s': not a device name\n", val.c_str());
          return kExitUsage;
        }
        cfg.pace_devices.push_back(val);
        break;
      case 's':
        cfg.estimate_server = val;
        break;
      case kTlsCa:
        cfg.tls_ca = val;
        break;
      case kTlsCert:
        cfg.tls_cert = val;
        break;
      case kTlsKey:
        cfg.tls_key = val;
        break;
      case kTlsServerName:
        cfg.tls_server_name = val;
        break;
      case kReportTokenFile:
        cfg.report_token_file = val;
        break;
      case 'f':
        cfg.estimates_file = val;
        break;
      case 'm': {
        auto m = parse_mode(val);
        if (!m) {
          std::fprintf(stderr, "spand-agent: --mode '%s': expected bpf, route or auto\n",
                       val.c_str());
          return kExitUsage;
        }
        cfg.mode = *m;
        break;
      }
      case 'g':
        cfg.cgroup_path = val;
        break;
      case kPinDir:
        cfg.pin_dir = val;
        break;
      case kPrefixMap:
        cfg.prefix_map = val;
        break;
      case 'p': {
        PortConfig pc;
        if (!parse_port_flag(val, pc)) {
          std::fprintf(stderr,
                       "spand-agent: --port '%s': expected PORT:BYTES[:B] (PORT 0..65535, BYTES "
                       ">= 1, B 1 or 2)\n",
                       val.c_str());
          return kExitUsage;
        }
        std::erase_if(cfg.ports, [&](const PortConfig& o) { return o.port == pc.port; });
        cfg.ports.push_back(pc);
        break;
      }
      case 'P': {
        auto p = Prefix::parse(val);
        if (!p) {
          std::fprintf(stderr, "spand-agent: --prefix '%s': not an address or CIDR\n", val.c_str());
          return kExitUsage;
        }
        cfg.static_prefixes.push_back(*p);
        break;
      }
      case kMaxCwnd: {
        char* end = nullptr;
        errno = 0;
        const unsigned long v = std::strtoul(val.c_str(), &end, 10);
        if (val.empty() || *end || errno || val[0] == '-' || v < 1 || v > 65535) {
          std::fprintf(stderr, "spand-agent: --max-initial-cwnd '%s': expected 1..65535\n",
                       val.c_str());
          return kExitUsage;
        }
        cfg.policy.max_initial_cwnd = static_cast<uint32_t>(v);
        break;
      }
      case kMinSamples: {
        char* end = nullptr;
        errno = 0;
        const unsigned long long v = std::strtoull(val.c_str(), &end, 10);
        if (val.empty() || *end || errno || val[0] == '-') {
          std::fprintf(stderr, "spand-agent: --min-samples '%s': expected a count >= 0\n",
                       val.c_str());
          return kExitUsage;
        }
        cfg.policy.min_samples = v;
        break;
      }
      case kMetrics:
        cfg.metrics_listen = val;
        break;
      case kPrefixLenV4:
      case kPrefixLenV6: {
        const unsigned long most = flag == kPrefixLenV4 ? 32 : 128;
        char* end = nullptr;
        const unsigned long v = std::strtoul(val.c_str(), &end, 10);
        if (val.empty() || *end || val[0] == '-' || v < 1 || v > most) {
          std::fprintf(stderr, "spand-agent: --prefix-len-v%c '%s': expected 1..%lu\n",
                       flag == kPrefixLenV4 ? '4' : '6', val.c_str(), most);
          return kExitUsage;
        }
        (flag == kPrefixLenV4 ? cfg.prefix_len_v4 : cfg.prefix_len_v6) = static_cast<uint32_t>(v);
        break;
      }
      case kReportSocket:
        cfg.report_socket = val;
        break;
      case kSampleTcpInfo:
        cfg.sample_tcp_info = true;
        break;
      case kSampleIntervalMs: {
        char* end = nullptr;
        errno = 0;
        unsigned long ms = std::strtoul(val.c_str(), &end, 10);
        if (val.empty() || *end || errno || val[0] == '-' || ms < 10 || ms > 3600000) {
          std::fprintf(stderr, "spand-agent: --sample-interval-ms '%s': expected 10..3600000\n",
                       val.c_str());
          return kExitUsage;
        }
        cfg.sample_interval_ms = static_cast<uint32_t>(ms);
        break;
      }
    }
  }
  if (auto err = validate(cfg)) {
    std::fprintf(stderr, "spand-agent: %s\n", err->message.c_str());
    return kExitUsage;
  }
  if (print_config) {
    const std::string text = config_to_toml(cfg);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? kExitOk : kExitRuntime;
  }
  return std::nullopt;
}

}  // namespace spand::agent
