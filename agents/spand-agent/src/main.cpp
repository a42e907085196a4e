// spand-agent: applies TCP/SPAND estimates to this server's kernel. A thin shell over
// AgentCore: flags and config, privileges, the kernel applier, sock_diag discovery, the
// report socket, /metrics, and the signal-driven exit that removes everything it installed.
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <getopt.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "agent_core.hpp"
#include "bpf_applier.hpp"
#include "config.hpp"
#include "dry_run_applier.hpp"
#include "file_source.hpp"
#include "metrics.hpp"
#include "pacing_qdisc.hpp"
#include "path_rate.hpp"
#include "route_applier.hpp"
#include "sock_diag.hpp"
#include "spand_maps.h"
#include "spand_socket.h"
#include "spand_version.hpp"
#include "tcp_info_dump.hpp"
#include "tcp_info_sampler.hpp"
#ifdef SPAND_AGENT_GRPC
#include <grpcpp/grpcpp.h>

#include "client_channel.hpp"
#include "grpc_source.hpp"
#endif
#ifdef SPAND_AGENT_SCALABLE
#include "scalable_cc.hpp"
#endif

namespace spand::agent {
namespace {

enum ExitCode {
  kExitOk = 0,
  kExitRuntime = 1,
  kExitUsage = 2,
  kExitBusy = 3,  // another agent holds the pin directory or a pacing device
  kExitPrivileges = 4
};

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

// CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns(): policy deadlines (KernelPolicy::expires_s)
// go to the sock_ops program as they are.
class SteadyClock : public Clock {
 public:
  double now_s() override {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
};

// Logs each kernel change on stderr, the record of what the agent did.
class LoggingApplier : public KernelApplier {
 public:
  explicit LoggingApplier(KernelApplier& inner) : inner_(inner) {}
  const char* name() const override { return inner_.name(); }
  bool per_port() const override { return inner_.per_port(); }
  bool start(std::string& e) override { return inner_.start(e); }
  bool upsert(const KernelPolicy& p, std::string& e) override {
    bool ok = inner_.upsert(p, e);
    if (ok)
      std::fprintf(stderr, "spand-agent: applied %s syn_rto_ms=%u cwnd=%u%s\n", describe(p).c_str(),
                   p.syn_rto_ms, std::max(p.init_cwnd_segments, p.pacing_cwnd_segments),
                   p.capped ? " (capped)" : "");
    return ok;
  }
  // A deadline moved on: the policy itself is what was logged.
  bool renew(const KernelPolicy& p, std::string& e) override { return inner_.renew(p, e); }
  bool remove(const PolicyKey& k, std::string& e) override {
    bool ok = inner_.remove(k, e);
    if (ok)
      std::fprintf(stderr, "spand-agent: removed port=%u prefix=%s\n", k.port,
                   k.prefix.str().c_str());
    return ok;
  }
  void stop() override { inner_.stop(); }
  bool active() const override { return inner_.active(); }

 private:
  KernelApplier& inner_;
};

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: spand-agent [options]\n"
      "  -c, --config FILE          TOML configuration (see deploy/config/agent.toml)\n"
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
      "exit status: 0 ok, 1 runtime error, 2 bad usage or configuration, 3 another agent\n"
      "holds the pin directory or a pacing device, 4 missing privileges\n");
}

bool has_cap(int cap) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

std::string find_cgroup2() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string fstype;
    after >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream fields(line);
    std::string id, parent, devno, root, mnt;
    fields >> id >> parent >> devno >> root >> mnt;
    return mnt;
  }
  return "";
}

uint32_t detect_kernel_hz() {
  std::string cmd = "gzip -dc /proc/config.gz 2>/dev/null | grep '^CONFIG_HZ='";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    unsigned hz = 0;
    int n = std::fscanf(p, "CONFIG_HZ=%u", &hz);
    pclose(p);
    if (n == 1 && hz) return hz;
  }
  std::ifstream boot("/boot/config-" + [] {
    std::ifstream r("/proc/sys/kernel/osrelease");
    std::string s;
    r >> s;
    return s;
  }());
  std::string line;
  while (std::getline(boot, line))
    if (line.rfind("CONFIG_HZ=", 0) == 0) return static_cast<uint32_t>(std::stoul(line.substr(10)));
  return 0;
}

std::set<std::string> available_cc() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::set<std::string> out;
  std::string s;
  while (in >> s) out.insert(s);
  return out;
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

int open_report_socket(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  unlink(path.c_str());
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(s);
    return -1;
  }
  chmod(path.c_str(), 0666);  // any local application may report
  return s;
}

// TCP_INFO samples on their way to Report, and what became of them (for /metrics).
struct TcpReporter {
  std::vector<TcpSample> pending;
  std::array<uint64_t, 3> sent_by_kind{};
  uint64_t dropped = 0;
};

constexpr size_t kMaxPendingTcpSamples = 10000;  // the service is down: drop, do not grow

#ifdef SPAND_AGENT_GRPC
// One dump, its samples, one Report call. `grpc` null (dry run): samples are printed instead.
void sample_tcp_info(const AgentConfig& cfg, TcpInfoSampler& sampler, TcpReporter& rep,
                     GrpcEstimateSource* grpc) {
  TcpInfoDump dump;
  std::string err;
  if (!dump_tcp_info(dump, err)) {
    // A partial dump would look like ended connections: skip the interval instead.
    std::fprintf(stderr, "spand-agent: tcp_info: %s\n", err.c_str());
    return;
  }
  auto sockets = accepted_sockets(dump, [&](uint16_t port) {
    const PortConfig* pc = cfg.port(port);
    return pc && pc->enabled;
  });
  size_t before = rep.pending.size();
  sampler.on_dump(sockets, rep.pending);
  if (!grpc) {
    static const char* kKind[] = {"rtt_us", "wc_loss_segments", "wc_end_segments"};
    for (size_t i = before; i < rep.pending.size(); ++i)
      std::fprintf(stderr, "spand-agent: dry-run: sample %s=%u client=%s\n",
                   kKind[static_cast<size_t>(rep.pending[i].kind)], rep.pending[i].value,
                   rep.pending[i].remote.addr_str().c_str());
    rep.pending.clear();
    return;
  }
  if (rep.pending.empty()) return;
  std::vector<ReportItem> items;
  items.reserve(rep.pending.size());
  for (const TcpSample& t : rep.pending) {
    ReportItem it;
    it.client_address = t.remote.addr_str();
    if (t.kind == TcpSampleKind::kRtt)
      it.rtt_us = t.value;
    else
      it.wc_segments = t.value;
    it.source = "spand-agent/tcp_info";
    items.push_back(std::move(it));
  }
  if (grpc->report(items)) {
    for (const TcpSample& t : rep.pending) ++rep.sent_by_kind[static_cast<size_t>(t.kind)];
    rep.pending.clear();
  } else if (rep.pending.size() > kMaxPendingTcpSamples) {
    rep.dropped += rep.pending.size();
    rep.pending.clear();
  }
}
#endif

int run(int argc, char** argv) {
  AgentConfig cfg;
  std::string config_path;
  // Flags win over the file: collect them first, apply after loading it.
  std::vector<std::pair<int, std::string>> flags;
  bool once = false;
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
    kPinDir
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
        once = true;
        break;
      case kPrintConfig:
        print_config = true;
        break;
      case kVersion: {
        std::vector<std::pair<std::string, std::string>> libs;
        libs.emplace_back("libbpf", std::to_string(libbpf_major_version()) + "." +
                                        std::to_string(libbpf_minor_version()));
#ifdef SPAND_AGENT_GRPC
        libs.emplace_back("gRPC", grpc::Version());
#endif
        print_version("spand-agent", libs);
        return kExitOk;
      }
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

  if (!cfg.dry_run) {
    bool net_admin = has_cap(CAP_NET_ADMIN);
    bool bpf = has_cap(CAP_BPF) || has_cap(CAP_SYS_ADMIN);
    bool need_bpf = cfg.mode != Mode::kRoute;
    if (!net_admin || (cfg.mode == Mode::kBpf && !bpf)) {
      std::fprintf(stderr,
                   "spand-agent: missing privileges: %s mode needs CAP_NET_ADMIN%s (have "
                   "CAP_NET_ADMIN=%s, CAP_BPF=%s). Run as root or grant them (systemd: "
                   "AmbientCapabilities=CAP_NET_ADMIN CAP_BPF CAP_SYS_ADMIN); --dry-run needs "
                   "none.\n",
                   mode_name(cfg.mode), need_bpf ? " and CAP_BPF (or CAP_SYS_ADMIN)" : "",
                   net_admin ? "yes" : "no", bpf ? "yes" : "no");
      return kExitPrivileges;
    }
  }
  if (cfg.cgroup_path.empty()) cfg.cgroup_path = find_cgroup2();
  if (cfg.kernel_hz == 0) cfg.kernel_hz = detect_kernel_hz();
  if (cfg.kernel_hz == 0) {
    // Without HZ the SYN RTO reply (in jiffies) cannot be computed: do not seed it.
    std::fprintf(stderr,
                 "spand-agent: kernel HZ unknown (set agent.kernel_hz); not seeding the SYN RTO\n");
    cfg.policy.seed_syn_rto = false;
  }

  // Estimate source.
  std::unique_ptr<EstimateSource> source;
#ifdef SPAND_AGENT_GRPC
  GrpcEstimateSource* grpc_source = nullptr;
#endif
  if (!cfg.estimates_file.empty()) {
    auto fs = std::make_unique<FileEstimateSource>(cfg.estimates_file);
    std::string err;
    if (!fs->load(err)) {
      std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
      return kExitUsage;
    }
    source = std::move(fs);
  } else {
#ifdef SPAND_AGENT_GRPC
    const ClientTls tls{cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.tls_server_name};
    std::string err;
    std::string token;
    auto channel = make_client_channel(cfg.estimate_server, tls, "--tls-", err);
    if (!channel || !read_report_token(cfg.report_token_file, "--report-token-file", token, err)) {
      std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
      return kExitUsage;
    }
    auto gs = std::make_unique<GrpcEstimateSource>(std::move(channel), cfg.grpc_deadline_ms,
                                                   std::move(token));
    grpc_source = gs.get();
    source = std::move(gs);
#else
    std::fprintf(stderr, "spand-agent: built without gRPC; use --estimates-file\n");
    return kExitUsage;
#endif
  }

  // Kernel applier.
  std::vector<uint16_t> tune_ports;
  for (const auto& pc : cfg.ports)
    if (pc.tune) tune_ports.push_back(pc.port);
  std::unique_ptr<KernelApplier> kernel;
  BpfApplier* bpf_applier = nullptr;
  RouteApplier* route_applier = nullptr;
  std::string err;
  std::unique_ptr<PacingQdiscs> pacing;
  PinDirLock pin_lock;
  if (cfg.dry_run) {
    bool bpf_possible = cfg.mode != Mode::kRoute;
    kernel = std::make_unique<DryRunApplier>(bpf_possible ? "bpf" : "route", bpf_possible);
    kernel->start(err);
    for (const std::string& dev : cfg.pace_devices)
      std::fprintf(stderr,
                   "spand-agent: dry-run: would install an htb root qdisc %x: with %u pacing "
                   "classes (%llu to %llu bytes/s) on %s\n",
                   SPAND_HTB_MAJOR, PacingQdiscs::classes_per_device(),
                   static_cast<unsigned long long>(spand_pace_bin_rate(0)),
                   static_cast<unsigned long long>(spand_pace_bin_rate(SPAND_PACE_BINS - 1)),
                   dev.c_str());
  } else {
    if (cfg.mode != Mode::kRoute) {
      // Before anything else changes: a second agent must not touch the first one's program,
      // pins or pacing qdiscs. Route mode pins nothing.
      int holder = 0;
      switch (pin_lock.acquire(cfg.pin_dir, err, holder)) {
        case PinDirLock::Result::kLocked:
          break;
        case PinDirLock::Result::kBusy:
          std::fprintf(stderr,
                       "spand-agent: another spand-agent%s holds %s: one agent per pin "
                       "directory (stop it, or give this one its own --pin-dir / agent.pin_dir)\n",
                       holder ? (" (pid " + std::to_string(holder) + ")").c_str() : "",
                       cfg.pin_dir.c_str());
          return kExitBusy;
        case PinDirLock::Result::kError:
          if (cfg.mode == Mode::kBpf) {
            std::fprintf(stderr, "spand-agent: bpf mode: %s\n", err.c_str());
            return kExitRuntime;
          }
          std::fprintf(stderr, "spand-agent: bpf unavailable (%s); using route mode\n",
                       err.c_str());
          cfg.mode = Mode::kRoute;
          break;
      }
    }
    if (cfg.mode != Mode::kRoute && !cfg.pace_devices.empty()) {
      // Before the program loads: it is built knowing whether the classes exist.
      pacing = std::make_unique<PacingQdiscs>(cfg.pace_devices);
      if (!pacing->start(err)) {
        std::fprintf(stderr, "spand-agent: %s\n", err.c_str());
        return pacing->busy() ? kExitBusy : kExitRuntime;
      }
      std::fprintf(stderr, "spand-agent: pacing classes installed on %zu device(s)\n",
                   pacing->installed());
    }
    if (cfg.mode != Mode::kRoute) {
      auto b = std::make_unique<BpfApplier>(cfg.cgroup_path, cfg.kernel_hz, tune_ports,
                                            cfg.tune_outgoing, pacing != nullptr, cfg.pin_dir);
      b->set_prefix_lens(cfg.prefix_len_v4, cfg.prefix_len_v6);
      b->set_measure_trains(cfg.policy.path_rate && cfg.policy.window_rule == WindowRule::kRounds);
      if (b->start(err)) {
        bpf_applier = b.get();
        kernel = std::move(b);
      } else if (cfg.mode == Mode::kBpf) {
        std::fprintf(stderr, "spand-agent: bpf mode: %s\n", err.c_str());
        return kExitRuntime;
      } else {
        std::fprintf(stderr, "spand-agent: bpf unavailable (%s); using route mode%s\n", err.c_str(),
                     pacing ? " (without pacing classes: only the program selects them)" : "");
        pacing.reset();
      }
    }
    if (!kernel) {
      auto r = std::make_unique<RouteApplier>();
      if (!r->start(err)) {
        std::fprintf(stderr, "spand-agent: route mode: %s\n", err.c_str());
        return kExitRuntime;
      }
      route_applier = r.get();
      kernel = std::move(r);
    }
  }
  // A dry run's applier says "dry-run: apply ..." itself: nothing is logged as applied.
  LoggingApplier logging(*kernel);
  KernelApplier& logged = cfg.dry_run ? *kernel : logging;

  std::unique_ptr<AgentMetrics> metrics;
  if (!cfg.metrics_listen.empty()) {
    try {
      metrics = std::make_unique<AgentMetrics>(cfg.metrics_listen);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "spand-agent: /metrics on %s: %s\n", cfg.metrics_listen.c_str(),
                   ex.what());
      kernel->stop();
      pacing.reset();
      return kExitRuntime;
    }
  }
  int report_fd = -1;
  if (!cfg.report_socket.empty() && !cfg.dry_run) {
    report_fd = open_report_socket(cfg.report_socket);
    if (report_fd < 0)
      std::fprintf(stderr, "spand-agent: report socket %s: %s\n", cfg.report_socket.c_str(),
                   std::strerror(errno));
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  // Scalable TCP as a BPF congestion control, before the core reads the available list.
  std::set<std::string> ccs = available_cc();
#ifdef SPAND_AGENT_SCALABLE
  std::unique_ptr<ScalableCc> scalable;
  if (wants_scalable(cfg) && cfg.dry_run) {
    std::fprintf(stderr, "spand-agent: dry-run: would register congestion control %s\n",
                 kScalableCcName);
    ccs.insert(kScalableCcName);
  } else if (wants_scalable(cfg)) {
    scalable = std::make_unique<ScalableCc>();
    std::string log, serr;
    bool ok = scalable->start(log, serr);
    for (size_t a = 0, b; (b = log.find('\n', a)) != std::string::npos; a = b + 1)
      std::fprintf(stderr, "spand-agent: %s\n", log.substr(a, b - a).c_str());
    if (!ok) {
      std::fprintf(stderr, "spand-agent: congestion control %s: %s\n", kScalableCcName,
                   serr.c_str());
      kernel->stop();
      pacing.reset();
      return kExitRuntime;
    }
    if (scalable->owned())
      std::fprintf(stderr, "spand-agent: registered congestion control %s\n", kScalableCcName);
    ccs = available_cc();
  }
#else
  if (cfg.scalable) {
    std::fprintf(stderr, "spand-agent: built without Scalable TCP (no kernel BTF at build time)\n");
    return kExitUsage;
  }
#endif
  SteadyClock clock;
  AgentCore core(cfg, *source, logged, clock, ccs);
  std::fprintf(
      stderr, "spand-agent: running mode=%s cgroup=%s source=%s\n", kernel->name(),
      bpf_applier ? cfg.cgroup_path.c_str() : "-",
      cfg.estimates_file.empty() ? cfg.estimate_server.c_str() : cfg.estimates_file.c_str());

  // The path toward each prefix, from TCP_INFO of every connection this host accepted.
  PathRates paths(cfg.policy.path_rate_window_s, cfg.policy.share_window_s);
  const bool sample_paths = cfg.policy.path_rate && cfg.policy.window_rule == WindowRule::kRounds;
  if (sample_paths) {
    core.set_path_rates(&paths);
    // The sock_ops program times first-flight ACK trains: the rate needs one in the window.
    paths.require_trains(bpf_applier != nullptr);
    paths.hold_trains_s(kTrainHoldS);
    std::fprintf(stderr, "spand-agent: reading delivery rates every %u ms\n",
                 cfg.policy.path_rate_interval_ms);
  }
  double next_path_s = clock.now_s();
  std::vector<ReportItem> reports;
  TcpInfoSampler sampler(cfg.sample_max_sockets);
  TcpReporter tcp_reporter;
  if (cfg.sample_tcp_info)
    std::fprintf(stderr, "spand-agent: sampling tcp_info every %u ms (table of %u sockets)\n",
                 cfg.sample_interval_ms, cfg.sample_max_sockets);
  double next_refresh_s = clock.now_s();
  double next_sample_s = next_refresh_s;
  while (!g_stop) {
    if (sample_paths && clock.now_s() >= next_path_s) {
      next_path_s = clock.now_s() + cfg.policy.path_rate_interval_ms / 1000.0;
      TcpInfoDump dump;
      std::string dump_err;
      if (dump_tcp_info(dump, dump_err)) {
        const double now = clock.now_s();
        // Connections starting a response: 2 segments or more in flight, the request received
        // less than one round trip ago (their first windows meet at the bottleneck; a
        // connection already past its first round trip has adapted to the path).
        std::map<Prefix, uint32_t> senders;
        for (const TcpInfoSnapshot& s : dump.sockets) {
          if (!dump.listening_ports.count(s.local_port)) continue;  // connections we accepted
          const Prefix key = core.key_prefix(s.remote);
          paths.observe(key, s.delivery_rate_bytes_per_s, s.min_rtt_us, now, s.rtt_us,
                        s.total_retrans > 0);
          const uint64_t round_trip_us = s.min_rtt_us ? s.min_rtt_us : s.rtt_us;
          if (s.unacked_segments >= 2 && uint64_t{s.last_data_recv_ms} * 1000 < round_trip_us)
            ++senders[key];
        }
        for (const auto& [key, n] : senders) paths.observe_senders(key, n, now);
      }
      // The bottleneck rate from first-flight ACK trains (the delivery rate above reads the
      // bottleneck only once a flight reaches the BDP, which short transfers never do).
      if (bpf_applier) {
        const double now = clock.now_s();
        for (const auto& [prefix, rate] : bpf_applier->take_train_rates()) {
          const uint64_t falls = paths.falls();
          paths.observe_train(prefix, rate, now);
          if (paths.falls() != falls)
            std::fprintf(stderr, "spand-agent: path rate of %s fell to %llu B/s\n",
                         prefix.str().c_str(), static_cast<unsigned long long>(rate));
        }
      }
    }
    if (cfg.sample_tcp_info && clock.now_s() >= next_sample_s) {
      next_sample_s = clock.now_s() + cfg.sample_interval_ms / 1000.0;
#ifdef SPAND_AGENT_GRPC
      sample_tcp_info(cfg, sampler, tcp_reporter, cfg.dry_run ? nullptr : grpc_source);
#endif
    }
    if (clock.now_s() >= next_refresh_s) {
      next_refresh_s = clock.now_s() + cfg.refresh_interval_ms / 1000.0;
      std::vector<TcpConn> conns;
      std::string derr;
      if (dump_tcp_sockets(conns, derr)) {
        for (const Prefix& p : accepted_remotes(conns, [&](uint16_t port) {
               const PortConfig* pc = cfg.port(port);
               return pc && pc->enabled;
             }))
          core.observe(p);
      }
      if (sample_paths) paths.expire(clock.now_s());
      core.tick();
      uint64_t grpc_errors = 0;
#ifdef SPAND_AGENT_GRPC
      if (grpc_source) {
        grpc_errors = grpc_source->errors();
        if (!reports.empty() && grpc_source->report(reports)) reports.clear();
        if (reports.size() > 10000) reports.clear();  // the service is down: drop, do not grow
      }
#endif
      if (metrics)
        metrics->update(core.counters(), grpc_errors, kernel->active(),
                        route_applier ? route_applier->routes() : 0,
                        pacing ? pacing->installed() : 0,
                        bpf_applier ? bpf_applier->program_stats() : std::vector<uint64_t>{});
      if (metrics && cfg.sample_tcp_info)
        metrics->update_sampler(sampler.counters(), tcp_reporter.sent_by_kind, tcp_reporter.dropped,
                                sampler.tracked());
      if (once) break;
    }
    double next_s = cfg.sample_tcp_info ? std::min(next_refresh_s, next_sample_s) : next_refresh_s;
    if (sample_paths) next_s = std::min(next_s, next_path_s);
    int timeout_ms = std::max(0, static_cast<int>((next_s - clock.now_s()) * 1000.0 + 0.999));
    pollfd pfd{report_fd, POLLIN, 0};
    int n = poll(&pfd, report_fd >= 0 ? 1 : 0, timeout_ms);
    if (n > 0 && (pfd.revents & POLLIN)) {
      spand_report_msg msg{};
      while (recv(report_fd, &msg, sizeof(msg), 0) == static_cast<ssize_t>(sizeof(msg))) {
        if (msg.magic != SPAND_REPORT_MAGIC) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        inet_ntop(static_cast<int>(msg.family), msg.peer_addr, buf, sizeof(buf));
        ReportItem item;
        item.client_address = buf;
        // A connection that ended without retransmission: its cwnd is a W_c sample (DESIGN.md).
        item.wc_segments = msg.total_retrans == 0 ? msg.snd_cwnd_segments : 0;
        item.rtt_us = msg.rtt_us;
        reports.push_back(item);
      }
    }
  }
  std::fprintf(stderr, "spand-agent: stopping, removing %zu policies\n", core.installed());
  core.shutdown();
#ifdef SPAND_AGENT_SCALABLE
  if (scalable) {  // after the sock_ops program is gone: no new socket selects it
    std::string what = scalable->stop();
    if (!what.empty()) std::fprintf(stderr, "spand-agent: %s\n", what.c_str());
  }
#endif
  pacing.reset();  // after the program is gone: no socket selects a class any more
  if (report_fd >= 0) {
    close(report_fd);
    unlink(cfg.report_socket.c_str());
  }
  std::fprintf(stderr, "spand-agent: stopped\n");
  return kExitOk;
}

}  // namespace
}  // namespace spand::agent

int main(int argc, char** argv) {
  return spand::agent::run(argc, argv);
}
