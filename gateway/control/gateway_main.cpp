// spand-gateway: passive TCP reconstruction from DPDK ports or pcap files.
//   spand-gateway --pcap FILE [options]
//   spand-gateway [EAL arguments] -- [options]
#include <pcap/pcap.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "capture/collector.hpp"
#include "capture/prefix_map_file.hpp"
#include "capture/prefix_parse.hpp"
#include "capture/source.hpp"
#include "control/cli_checks.hpp"
#include "control/config_file.hpp"
#include "control/control_plane.hpp"
#include "dataplane/parse.hpp"
#include "exit_status.hpp"
#include "spand_version.hpp"
#ifdef SPAND_HAVE_DPDK
#include <rte_version.h>
#endif
#ifdef SPAND_HAVE_ESTIMATES
#include <grpcpp/grpcpp.h>

#include "estimates/estimate.hpp"
#include "estimates/sample_writer.hpp"
#endif

namespace {

namespace exit_status = spand::exit_status;
using spand::SourceStatus;

constexpr const char* kDescription =
    "spand-gateway reconstructs every TCP connection passively (from a span port through DPDK, "
    "or from a pcap/pcapng file through libpcap), infers each sender's congestion window, and "
    "emits W_c and RTT samples per client network.\n\n"
    "  spand-gateway --pcap FILE [options]            read a capture file (no EAL)\n"
    "  spand-gateway --interface IF [options]         read a live interface (a span port or a\n"
    "                                                 Linux mirror) with libpcap, until SIGINT\n"
    "  spand-gateway EAL-ARGS -- [options]            read DPDK ports, e.g.\n"
    "      spand-gateway --no-huge -m 1024 --no-pci --vdev net_pcap0,rx_pcap=F -- --flows-out -\n"
    "  spand-gateway --config /etc/spand/gateway.toml  the same options from a TOML file\n";

// Records or samples were lost: a write error on --flows-out/--samples-out/stdout, or samples
// that did not reach Redis (unreachable, or dropped from the full backlog).
constexpr int kExitOutputLoss = exit_status::kDataLoss;
// A source's outcome is main()'s status: the sources use the shared table's numbers.
static_assert(int(SourceStatus::kBadInput) == exit_status::kUsage);
static_assert(int(SourceStatus::kRuntimeError) == exit_status::kRuntime);
static_assert(int(SourceStatus::kCaptureLoss) == exit_status::kCaptureLoss);

// After the options in --help (and so in the man page): what a script or a unit can rely on.
constexpr const char* kExitStatus =
    "Exit status:\n"
    "  0  success (also after SIGINT or SIGTERM)\n"
    "  2  bad usage, configuration or input: an unknown option, a value out of range, a\n"
    "     configuration file error (FILE:LINE), an unreadable or damaged capture file, an\n"
    "     interface that cannot be opened, --redis without --client-key-file\n"
    "  3  runtime error: a gRPC or /metrics port that cannot be bound, a capture that fails\n"
    "     while running\n"
    "  4  a live run that lost frames before the gateway (kernel or NIC drops) or whose\n"
    "     interface went away\n"
    "  5  records or samples lost: a write error on an output, or samples that did not reach\n"
    "     Redis (also: a client id key that differed from the other writers', nothing written)\n"
    "A lower status wins when several apply. The numbers mean the same in every spand binary\n"
    "(docs/exit-status.md).";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "spand-gateway: %s\nTry 'spand-gateway --help'.\n", msg.c_str());
  return exit_status::kUsage;
}

void print_gateway_version() {
  std::vector<std::pair<std::string, std::string>> libs;
#ifdef SPAND_HAVE_DPDK
  libs.emplace_back("DPDK", rte_version());
#endif
  libs.emplace_back("libpcap", pcap_lib_version());
#ifdef SPAND_HAVE_ESTIMATES
  libs.emplace_back("gRPC", grpc::Version());
#endif
  spand::print_version("spand-gateway", libs);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spand;
  // Split "EAL args -- gateway args" (DPDK's convention).
  std::vector<std::string> eal_args;
  std::vector<std::string> gw_args;
  int dashdash = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      dashdash = i;
      break;
    }
  }
  if (dashdash > 0) {
    for (int i = 0; i < dashdash; ++i) eal_args.emplace_back(argv[i]);
    for (int i = dashdash + 1; i < argc; ++i) gw_args.emplace_back(argv[i]);
  } else {
    for (int i = 1; i < argc; ++i) gw_args.emplace_back(argv[i]);
  }

  CLI::App app{kDescription, "spand-gateway"};
  app.get_formatter()->column_width(36);
  app.footer(kExitStatus);
  CommandLine cl;
  cl.print_version = print_gateway_version;
  // Names before the options were unified across the binaries.
  cl.aliases = {{"--v4-prefix-len", "--prefix-len-v4"}, {"--v6-prefix-len", "--prefix-len-v6"}};
  add_config_options(app, cl);
  std::string pcap_path;
  SourceOptions src;
  OutputOptions out_opts;
  ControlOptions ctl;
  bool prefix_summary = false;
  bool keep_serving = false;
  std::vector<std::string> inside;
  std::vector<std::string> eal_from_options;
  unsigned v4_len = 24, v6_len = 48;

  app.add_option("--pcap", pcap_path,
                 "Read this pcap or pcapng file with libpcap (no EAL); '-' reads standard input "
                 "(zcat F.pcap.gz | spand-gateway --pcap -)")
      ->check(CLI::Validator(
          [](std::string& path) { return path == "-" ? std::string() : CLI::ExistingFile(path); },
          "FILE"));
  app.add_option("--interface,-i", src.live.interface,
                 "Read this live interface with libpcap (TPACKET_V3, per-packet ns timestamps)");
  app.add_option("--buffer-mb", src.live.buffer_mb, "Live: kernel ring size in MiB")
      ->default_val(src.live.buffer_mb)
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--snaplen", src.live.snaplen, "Live: bytes kept per frame (headers suffice)")
      ->default_val(src.live.snaplen)
      ->check(CLI::Range(96u, 65535u));
  app.add_option("--timestamp", src.live.tstamp_type,
                 "Live: timestamp source (host, adapter, adapter_unsynced); default host");
  app.add_option("--duration-s", src.live.duration_s, "Live: stop after this many seconds")
      ->default_val(0);
  app.add_option("--filter", src.filter, "Capture filter in libpcap syntax, e.g. 'tcp port 443'");
  app.add_option("--flows-out", out_opts.flows_path,
                 "Write one JSON object per connection (JSON Lines) to PATH ('-' = stdout)");
  app.add_option("--samples-out", out_opts.samples_path,
                 "Write one JSON object per W_c or RTT sample to PATH ('-' = stdout)");
  app.add_flag("--prefix-summary", prefix_summary,
               "At exit, print count and mean of W_c and RTT per client prefix to stdout, "
               "with the connections per identified sender (reno, cubic, scalable, bbr; "
               "docs/records.md); client ids (wc_median, clients) under --client-key-file's "
               "key when given, else the public key");
  app.add_option("--prefix-len-v4", v4_len, "Client prefix length for IPv4")
      ->default_val(24)
      ->check(CLI::Range(1, 32));
  app.add_option("--prefix-len-v6", v6_len, "Client prefix length for IPv6")
      ->default_val(48)
      ->check(CLI::Range(1, 128));
  std::string prefix_map_path;
  app.add_option("--prefix-map", prefix_map_path,
                 "Network-aware clustering: a client's prefix is the longest of this CIDR list "
                 "(one per line, IPv4 and IPv6, e.g. from a BGP RIB) that covers it; the "
                 "--prefix-len-v4/v6 lengths only for addresses none covers. Re-read within a "
                 "second of a change");
  app.add_option("--eal-args", eal_from_options,
                 "DPDK EAL arguments, as a config file's list (eal_args = [\"-l\", \"0-1\", "
                 "\"-a\", \"0000:03:00.0\"]); on the command line they go before '--'");
  app.add_option("--inside", inside,
                 "Server-side network (repeatable); decides roles when no SYN was seen");
  app.add_option("--flow-capacity", src.worker.flow_capacity,
                 "Connections tracked at once per worker; when full the oldest idle is evicted")
      ->default_val(src.worker.flow_capacity)
      ->check(CLI::Range(1u, 1u << 28));
  app.add_option("--syn-timeout-ms", src.worker.syn_timeout_ms, "Idle timeout of an unanswered SYN")
      ->default_val(src.worker.syn_timeout_ms)
      ->check(CLI::Range(1u, 3'600'000u));
  app.add_option("--idle-timeout-s", src.worker.idle_timeout_s,
                 "Idle timeout of an established connection")
      ->default_val(src.worker.idle_timeout_s)
      ->check(CLI::Range(1u, 604'800u));
  app.add_option("--closing-timeout-ms", src.worker.closing_timeout_ms,
                 "Time a connection stays after FIN/RST before its record is written")
      ->default_val(src.worker.closing_timeout_ms)
      ->check(CLI::Range(1u, 3'600'000u));
  app.add_flag("--progress", src.progress, "Print progress to stderr on long inputs");
  app.add_option("--workers", src.pcap_threads,
                 "--pcap: threads for the replay, same outputs either way: 1 reads, tracks and "
                 "writes on one; 2 tracks on a second thread; 0 (default): 2 on a machine with "
                 "two cores or more, 1 with --redis or both outputs on '-'")
      ->default_val(0)
      ->check(CLI::Range(0u, 2u));
  app.add_flag("--queues-by-flow", src.queues_by_flow,
               "DPDK: the rx queues of ports without RSS already hold whole connections, split "
               "by flow alike on every port (e.g. net_pcap's rx_pcap files of one capture split "
               "by connection): queue q goes to worker lcore q mod workers, as with RSS. "
               "Default: the first worker polls them all");
  std::vector<std::string> decap_names;
  app.add_option("--decap", decap_names,
                 "Open these tunnels and track the TCP inside (mirrored traffic sent to the "
                 "gateway encapsulated, a remote span): vxlan (UDP 4789: AWS and Azure traffic "
                 "mirroring), geneve (UDP 6081), erspan (GRE, types I-III: Cisco, Arista, Linux "
                 "remote span), gre (Ethernet, IPv4 or IPv6 in GRE), all; comma separated or "
                 "repeated. Default: none (a tunnel is counted as not TCP)")
      ->delimiter(',')
      ->check(CLI::IsMember({"vxlan", "geneve", "erspan", "gre", "all"}));
  std::string hash_seed;
  app.add_option("--hash-seed", hash_seed,
                 "Seed of the flow table's keyed hash (decimal or 0x hex). Default: fixed for "
                 "--pcap (the same output every time), random per process for live sources")
      ->check(unsigned_64());

  // The estimate side: Redis writer, gRPC estimate service, metrics.
  CLI::App* cg = &app;
  app.option_defaults()->group("Estimates");
  cg->add_option("--redis", ctl.redis_url, "Redis URL: redis://[[user]:password@]host[:port]");
  cg->add_option("--redis-cluster", ctl.redis_cluster_seeds,
                 "Redis Cluster seed nodes host:port (comma separated or repeated)")
      ->delimiter(',');
  cg->add_option("--redis-password-file", ctl.redis_password_file,
                 "Read the Redis password from this file");
  cg->add_option("--redis-key-prefix", ctl.redis_key_prefix,
                 "First part of every Redis key: deployments sharing one Redis use one each "
                 "(the Cluster hash tag follows it)");
  cg->add_option("--client-key-file", ctl.client_key_file,
                 "Key of the client ids in the W_c client tables: a file whose first line is 32 "
                 "hex digits, the same for every gateway and replica writing to one Redis. "
                 "Required with --redis/--redis-cluster; 'public': the published key (replays, "
                 "tests), with which addresses can be chosen to win the tables' places. Also "
                 "the key of --prefix-summary's client ids");
  cg->add_option("--flush-interval-ms", ctl.flush_interval_ms, "Flush accumulators this often")
      ->default_val(ctl.flush_interval_ms)
      ->check(CLI::Range(1u, 3'600'000u));
  cg->add_option("--bucket-s", ctl.bucket_s, "Width of a Redis time bucket")
      ->default_val(ctl.bucket_s)
      ->check(CLI::Range(1u, 3600u));
  cg->add_option("--window-s", ctl.window_s, "Sliding window S of the estimate")
      ->default_val(ctl.window_s)
      ->check(CLI::Range(1u, 86400u));
  cg->add_option("--min-samples", ctl.min_samples, "Fewer W_c samples in the window: SLOW_START")
      ->default_val(ctl.min_samples)
      ->check(CLI::Range(1u, 1'000'000u));
  cg->add_option("--min-clients", ctl.min_clients,
                 "Fewer distinct client addresses behind the W_c samples: SLOW_START")
      ->default_val(ctl.min_clients)
      ->check(CLI::Range(1u, 32u));
  cg->add_option("--max-wc-cv", ctl.max_wc_cv,
                 "Outlier rule for windows whose W_c is the mean (buckets without a client "
                 "table): W_c standard deviation above this many means gives SLOW_START (0: off)")
      ->default_val(ctl.max_wc_cv)
      ->check(finite_range(0.0, 100.0));
  cg->add_option("--clock-skew-s", ctl.clock_skew_s,
                 "Samples, Report timestamps and the store clock may lie at most this far "
                 "ahead of the wall clock")
      ->default_val(ctl.clock_skew_s)
      ->check(CLI::Range(1u, 86400u));
  cg->add_option("--backlog-max", ctl.backlog_max_updates,
                 "Unflushed bucket updates kept while Redis is unreachable")
      ->default_val(ctl.backlog_max_updates)
      ->check(CLI::Range(1u, 100'000'000u));
  cg->add_option("--grpc-listen", ctl.grpc_listen, "Serve spand.v1.Estimates on HOST:PORT")
      ->check(listen_address());
  cg->add_option("--metrics-listen", ctl.metrics_listen, "Serve Prometheus /metrics on HOST:PORT")
      ->check(listen_address());
  cg->add_option("--grpc-tls-cert", ctl.grpc_tls_cert,
                 "gRPC over TLS: server certificate chain (PEM file)");
  cg->add_option("--grpc-tls-key", ctl.grpc_tls_key, "gRPC over TLS: its private key (PEM file)");
  cg->add_option("--grpc-client-ca", ctl.grpc_client_ca,
                 "Mutual TLS: accept only clients with a certificate signed by this CA (PEM)");
  cg->add_option("--report-token-file", ctl.report_token_file,
                 "Report needs 'authorization: Bearer <first line of this file>'");
  cg->add_option("--max-cwnd-opt", ctl.max_cwnd_opt,
                 "Cap on the cwnd_opt the service answers, segments (0: none)")
      ->default_val(ctl.max_cwnd_opt)
      ->check(CLI::Range(0u, 65535u));
  cg->add_option("--report-rate", ctl.report_rate_per_s,
                 "Report messages per second per client (certificate or address); 0: no limit")
      ->default_val(ctl.report_rate_per_s);
  cg->add_option("--report-max-clients", ctl.report_max_clients,
                 "Distinct client addresses one Report caller may add to one prefix per window "
                 "(--window-s); samples for more are rejected as too_many_clients (0: no cap)")
      ->default_val(ctl.report_max_clients)
      ->check(CLI::Range(0u, 65535u));
  cg->add_flag("--keep-serving", keep_serving,
               "After a --pcap replay, keep serving gRPC and metrics until SIGINT/SIGTERM");

  if (const int status = parse_command_line(app, "spand-gateway", gw_args, cl); status >= 0)
    return status;
  if (!eal_from_options.empty()) {
    if (!eal_args.empty()) return usage_error("EAL arguments both before '--' and in --eal-args");
    eal_args.emplace_back(argv[0]);
    eal_args.insert(eal_args.end(), eal_from_options.begin(), eal_from_options.end());
  }

  out_opts.prefix.v4_len = uint8_t(v4_len);
  out_opts.prefix.v6_len = uint8_t(v6_len);
  std::unique_ptr<PrefixMapWatcher> prefix_map_watcher;
  if (!prefix_map_path.empty()) {
    out_opts.prefix.map = std::make_shared<PrefixMapSource>();
    std::string map_error;
    if (!load_prefix_map(prefix_map_path, *out_opts.prefix.map, map_error)) {
      return usage_error(map_error);
    }
    prefix_map_watcher = std::make_unique<PrefixMapWatcher>(prefix_map_path, out_opts.prefix.map);
  }
  ctl.prefix = out_opts.prefix;  // the same map: samples, the Redis keys and the service agree
  for (const std::string& net : inside) {
    Prefix p;
    if (!parse_prefix(net, p)) return usage_error("--inside: not a network: '" + net + "'");
    TrackerConfig& t = src.worker.tracker;
    if (t.inside_count == TrackerConfig::kMaxInside) {
      return usage_error("--inside: at most " + std::to_string(TrackerConfig::kMaxInside) +
                         " networks");
    }
    t.inside[t.inside_count++] = p;
  }
  for (const std::string& name : decap_names) {
    src.worker.decap |= name == "vxlan"    ? kDecapVxlan
                        : name == "geneve" ? kDecapGeneve
                        : name == "erspan" ? kDecapErspan
                        : name == "gre"    ? kDecapGre
                                           : kDecapAll;
  }
  if (!hash_seed.empty()) {
    char* end = nullptr;
    errno = 0;
    src.worker.hash_seed = std::strtoull(hash_seed.c_str(), &end, 0);
    if (errno || end == hash_seed.c_str() || *end)
      return usage_error("--hash-seed: not a 64-bit number: '" + hash_seed + "'");
  } else if (pcap_path.empty()) {
    // Live traffic: a secret nobody can choose 4-tuples against.
    std::random_device rd;
    src.worker.hash_seed = (uint64_t(rd()) << 32) ^ rd();
  }
  const int inputs =
      int(!pcap_path.empty()) + int(!src.live.interface.empty()) + int(!eal_args.empty());
  if (inputs == 0) {
    return usage_error(
        "no input: give --pcap FILE, --interface IF, or EAL arguments, then --, then options");
  }
  if (inputs > 1) {
    return usage_error("give one input: --pcap FILE, --interface IF or DPDK's EAL arguments");
  }

  if (prefix_summary && !ctl.client_key_file.empty()) {
#ifdef SPAND_HAVE_ESTIMATES
    std::string key_error;
    if (!read_client_key_file(ctl.client_key_file, out_opts.client_key, key_error))
      return usage_error(key_error);
#else
    return usage_error("this build has no estimates component: --client-key-file unsupported");
#endif
  }
  Collector collector(out_opts);
  std::string error;
  if (!collector.open(error)) return usage_error(error);

  std::unique_ptr<ControlPlane> control;
  const bool wants_control = !ctl.redis_url.empty() || !ctl.redis_cluster_seeds.empty() ||
                             !ctl.grpc_listen.empty() || !ctl.metrics_listen.empty();
  if (wants_control) {
#ifdef SPAND_HAVE_ESTIMATES
    int status = exit_status::kUsage;
    control = make_control_plane(ctl, error, &status);
    if (!control && status != exit_status::kUsage) {
      std::fprintf(stderr, "spand-gateway: %s\n", error.c_str());
      return status;
    }
    if (!control) return usage_error(error);
    collector.set_sample_hook([&control](const Sample& s) {
      if (s.kind == SampleKind::kNewConnection) {
        control->on_new_connection(s.client, s.ts_ns);
      } else {
        control->on_sample(s);
      }
    });
    collector.set_flow_hook([&control](const FlowRecord& r) { control->on_flow(r); });
    collector.set_tick_hook([&control](uint64_t now_ns, const std::vector<const Worker*>& ws) {
      control->tick(now_ns, ws);
    });
#else
    return usage_error("this build has no estimates component (Redis, gRPC, metrics)");
#endif
  }

  SourceStatus st;
  if (!pcap_path.empty()) {
    st = run_pcap_source(pcap_path, src, collector, error);
  } else if (!src.live.interface.empty()) {
    st = run_live_source(src, collector, error);
  } else {
#ifdef SPAND_HAVE_DPDK
    st = run_dpdk_source(eal_args, src, collector, error);
#else
    return usage_error("this build has no DPDK support; use --pcap FILE");
#endif
  }
  if (!error.empty()) std::fprintf(stderr, "spand-gateway: %s\n", error.c_str());
  if (prefix_map_watcher) {
    std::fprintf(stderr,
                 "prefix map: %zu prefixes, %llu lookups of addresses no prefix covers (given "
                 "/%u or /%u), %llu reloads\n",
                 out_opts.prefix.map->current.load()->size(),
                 (unsigned long long)out_opts.prefix.map->uncovered.load(), v4_len, v6_len,
                 (unsigned long long)prefix_map_watcher->reloads());
  }
  const bool redis_ok = !control || control->finish(keep_serving && !pcap_path.empty());
  if (prefix_summary) {
    Collector::PrefixVerdict verdict;
#ifdef SPAND_HAVE_ESTIMATES
    // The service's verdict on the whole run's sums (not a window), "now" at the newest sample.
    verdict = [&ctl](const Accumulator& a) {
      return verdict_name(
          compute_estimate(a, a.newest_ts_ns, ctl.min_samples, {}, ctl.min_clients, ctl.max_wc_cv)
              .verdict);
    };
#endif
    collector.print_prefix_summary(stdout, verdict);
  }
  collector.flush();  // --flows-out/--samples-out "-" share stdout with the prefix summary
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "spand-gateway: writing stdout: %s\n", std::strerror(errno));
    if (st == SourceStatus::kOk) return kExitOutputLoss;
  }
  // Input errors (2, 3) and capture loss (4) come first; then lost records or samples (5).
  if (st == SourceStatus::kOk && (collector.output_failed() || !redis_ok)) return kExitOutputLoss;
  return static_cast<int>(st);
}
