// spand-estimates: the estimate service without capture, backed by the same Redis as the
// gateways (a stateless replica; run as many as the agents need). See README, "Estimate service
// (`spand.v1`)".
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "capture/prefix_map_file.hpp"
#include "control/cli_checks.hpp"
#include "control/config_file.hpp"
#include "control/service_stack.hpp"
#include "estimates/redis_schema.hpp"
#include "exit_status.hpp"
#include "spand_version.hpp"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

uint64_t wall_now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}
}  // namespace

int main(int argc, char** argv) {
  using namespace spand;
  StackOptions so;
  ControlOptions& c = so.control;
  c.grpc_listen = "127.0.0.1:50051";  // loopback unless told otherwise
  std::string clock_mode = "redis";
  std::vector<std::string> cluster;
  unsigned v4_len = c.prefix.v4_len, v6_len = c.prefix.v6_len;
  uint32_t clock_poll_ms = 100;

  CLI::App app{"spand-estimates: stateless replica of the spand.v1 estimate service (no capture)",
               "spand-estimates"};
  app.footer(
      "Exit status:\n"
      "  0  stopped by SIGINT or SIGTERM, the last Report samples written to Redis\n"
      "  2  bad usage or configuration (an unknown option, a value out of range, a\n"
      "     configuration file error naming FILE:LINE, an unreadable TLS or key file, no\n"
      "     --client-key-file without --read-only)\n"
      "  3  runtime error: the gRPC or /metrics port cannot be bound (in use, an address not\n"
      "     on this host)\n"
      "  5  Report samples that did not reach Redis at exit, or a client id key that differed\n"
      "     from the other writers' (nothing was written)\n"
      "The numbers mean the same in every spand binary (docs/exit-status.md).");
  CommandLine cl;
  cl.print_version = [] { print_version("spand-estimates", {{"gRPC", grpc::Version()}}); };
  // Names before the options were unified across the binaries.
  cl.aliases = {{"--cluster", "--redis-cluster"},
                {"--prefix-v4", "--prefix-len-v4"},
                {"--prefix-v6", "--prefix-len-v6"}};
  add_config_options(app, cl);
  app.add_option("--redis", c.redis_url, "Redis URL: redis://[[user]:password@]host[:port]");
  app.add_option("--redis-cluster", cluster,
                 "Redis Cluster seed nodes host:port (comma separated or repeated)")
      ->delimiter(',');
  app.add_option("--redis-password-file", c.redis_password_file,
                 "read the Redis password from this file");
  app.add_option("--redis-key-prefix", c.redis_key_prefix,
                 "First part of every Redis key: deployments sharing one Redis use one each "
                 "(the Cluster hash tag follows it)");
  app.add_option("--client-key-file", c.client_key_file,
                 "Key of the client ids of Report samples in the W_c client tables (required "
                 "unless --read-only): "
                 "a file whose first line is 32 hex digits, the same for every gateway and "
                 "replica writing to one Redis; 'public': the published key (tests), with which "
                 "addresses can be chosen to win the tables' places");
  app.add_flag("--read-only", so.read_only,
               "Serve Get, BatchGet, Watch and Top only: no Report (UNIMPLEMENTED), nothing "
               "written to Redis, no --client-key-file needed");
  app.add_option("--grpc-listen", c.grpc_listen, "gRPC listen address")
      ->capture_default_str()
      ->check(listen_address());
  app.add_option("--metrics-listen", c.metrics_listen,
                 "Prometheus /metrics listen address (empty: none)")
      ->check(listen_address());
  app.add_option("--grpc-tls-cert", c.grpc_tls_cert,
                 "gRPC over TLS: server certificate chain (PEM file)");
  app.add_option("--grpc-tls-key", c.grpc_tls_key, "gRPC over TLS: its private key (PEM file)");
  app.add_option("--grpc-client-ca", c.grpc_client_ca,
                 "mutual TLS: accept only clients with a certificate signed by this CA (PEM)");
  app.add_option("--report-token-file", c.report_token_file,
                 "Report needs 'authorization: Bearer <first line of this file>'");
  app.add_option("--max-cwnd-opt", c.max_cwnd_opt,
                 "cap on the cwnd_opt answered, segments (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 65535u));
  app.add_option("--report-rate", c.report_rate_per_s,
                 "Report messages per second per client (certificate or address); 0: no limit")
      ->capture_default_str();
  app.add_option("--report-max-clients", c.report_max_clients,
                 "Distinct client addresses one Report caller may add to one prefix per window "
                 "(--window-s); samples for more are rejected as too_many_clients (0: no cap)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 65535u));
  app.add_option("--window-s", c.window_s, "sliding window S, seconds")
      ->capture_default_str()
      ->check(CLI::Range(1u, 86400u));
  app.add_option("--bucket-s", c.bucket_s, "bucket width, seconds (must match the gateways')")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3600u));
  app.add_option("--min-samples", c.min_samples, "W_c samples needed for USE_ESTIMATE")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1'000'000u));
  app.add_option("--prefix-len-v4", v4_len, "IPv4 prefix length of the store's keys")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  app.add_option("--prefix-len-v6", v6_len, "IPv6 prefix length of the store's keys")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  std::string prefix_map_path;
  app.add_option("--prefix-map", prefix_map_path,
                 "Network-aware clustering, as the gateways': an address's prefix is the longest "
                 "of this CIDR list (one per line, IPv4 and IPv6) that covers it; the "
                 "--prefix-len-v4/v6 lengths only for addresses none covers. Must be the "
                 "gateways' file. Re-read within a second of a change");
  app.add_option("--flush-interval-ms", c.flush_interval_ms,
                 "how often Report samples are written to Redis")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3'600'000u));
  app.add_option("--clock", clock_mode,
                 "redis: newest capture time stored by the gateways (the key PREFIX:{g}:clock, "
                 "PREFIX of --redis-key-prefix); wall: this machine's clock")
      ->capture_default_str()
      ->check(CLI::IsMember({"redis", "wall"}));
  app.add_option("--clock-poll-ms", clock_poll_ms, "how often PREFIX:{g}:clock is read")
      ->capture_default_str()
      ->check(CLI::Range(1u, 60'000u));
  app.add_option("--min-clients", c.min_clients,
                 "distinct client addresses behind the W_c samples needed for USE_ESTIMATE")
      ->capture_default_str()
      ->check(CLI::Range(1u, 32u));
  app.add_option("--max-wc-cv", c.max_wc_cv,
                 "outlier rule for windows whose W_c is the mean (buckets without a client "
                 "table): W_c standard deviation above this many means gives SLOW_START (0: off)")
      ->capture_default_str()
      ->check(finite_range(0.0, 100.0));
  app.add_option(
         "--clock-skew-s", c.clock_skew_s,
         "tolerance for times ahead of the wall clock: a PREFIX:{g}:clock or Report timestamp "
         "further ahead is ignored or rejected")
      ->capture_default_str()
      ->check(CLI::Range(1u, 86400u));
  app.add_option("--cache-ttl-ms", so.core.cache_ttl_ms, "local estimate cache TTL (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t(0), uint64_t(3'600'000)));
  app.add_option("--cache-max-entries", so.core.cache_max_entries, "local cache bound")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1), size_t(100'000'000)));
  app.add_option(
         "--read-connections", so.read_connections,
         "Redis connections for reads, each with a reader thread pipelining the queued Gets")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1), size_t(64)));
  app.add_option("--decay-half-life-s", so.core.decay.half_life_s,
                 "W_c decay for quiet prefixes (0: off)")
      ->capture_default_str()
      ->check(finite_range(0.0, 31'536'000.0));
  if (const int status = parse_command_line(app, "spand-estimates",
                                            std::vector<std::string>(argv + 1, argv + argc), cl);
      status >= 0)
    return status;

  c.prefix.v4_len = uint8_t(v4_len);
  c.prefix.v6_len = uint8_t(v6_len);
  // The map goes into c.prefix, which the service's Get, BatchGet, Watch and Report and the
  // Report writer all resolve addresses with (prefix_of), as in the gateway.
  std::unique_ptr<PrefixMapWatcher> prefix_map_watcher;
  if (!prefix_map_path.empty()) {
    c.prefix.map = std::make_shared<PrefixMapSource>();
    std::string map_error;
    if (!load_prefix_map(prefix_map_path, *c.prefix.map, map_error)) {
      std::fprintf(stderr, "spand-estimates: %s\n", map_error.c_str());
      return exit_status::kUsage;
    }
    prefix_map_watcher =
        std::make_unique<PrefixMapWatcher>(prefix_map_path, c.prefix.map, "spand-estimates");
  }
  for (const std::string& seed : cluster)
    if (!seed.empty()) c.redis_cluster_seeds.push_back(seed);

  so.program = "spand-estimates";
  so.capture_metrics = false;
  SettableClock clock;
  std::string error;
  int status = exit_status::kUsage;
  std::unique_ptr<ServiceStack> stack = ServiceStack::create(so, clock, error, &status);
  if (!stack) {
    std::fprintf(stderr, "spand-estimates: %s\n", error.c_str());
    return status;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::fprintf(stderr, "spand-estimates: serving spand.v1 on port %d (clock %s)\n",
               stack->grpc_port(), clock_mode.c_str());

  // The key the gateways write (redis_schema.hpp), named as it is in this deployment's Redis.
  const std::string clock_name = clock_key(c.redis_key_prefix);
  auto next_clock = std::chrono::steady_clock::now();
  bool warned = false;
  bool warned_future = false;
  while (!g_stop) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_clock) {
      next_clock = now + std::chrono::milliseconds(clock_poll_ms);
      uint64_t ns = 0;
      if (clock_mode == "wall") {
        ns = wall_now_ns();
      } else if (!stack->write_store().read_clock(ns, error)) {
        if (!warned)
          std::fprintf(stderr, "spand-estimates: reading %s: %s\n", clock_name.c_str(),
                       error.c_str());
        warned = true;
      } else if (ns == 0) {
        // No gateway has written yet: agents' Report samples still need a sensible time.
        ns = wall_now_ns();
      } else if (const uint64_t wall = wall_now_ns();
                 ns > wall && ns - wall > uint64_t(c.clock_skew_s) * 1'000'000'000ULL) {
        // A clock beyond wall time + skew was poisoned (a forged sample, a broken capture
        // clock): not followed. The next flush of a gateway (or of Report samples) replaces it.
        if (!warned_future)
          std::fprintf(stderr,
                       "spand-estimates: %s is %.0f s ahead of this machine's clock; "
                       "using the wall clock until a gateway repairs it\n",
                       clock_name.c_str(), double(ns - wall) / 1e9);
        warned_future = true;
        ns = wall;
      }
      clock.advance_to(ns);
    }
    // The replica captures nothing: it has no capture time of its own to publish.
    stack->tick(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool flushed = stack->finish();  // a loss is said on stderr
  stack->shutdown();
  return flushed ? exit_status::kOk : exit_status::kDataLoss;
}
