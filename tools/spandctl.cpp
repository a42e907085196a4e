// spandctl: query a spand.v1 estimate server (get, watch, top), compute cwnd_opt offline
// (cwnd, from libspand) and tabulate loss events from flow records (losses). Usage and output
// formats: README, "spandctl".
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client_channel.hpp"
#include "exit_status.hpp"
#include "net/ip_prefix.hpp"
#include "spand/v1/estimates.grpc.pb.h"
#include "spand_version.hpp"
#include "spandctl_cwnd.h"
#include "spandctl_losses.h"

namespace {

using nlohmann::json;
namespace v1 = spand::v1;

// The table every spand binary shares (common/exit_status.hpp, docs/exit-status.md).
constexpr int kExitOk = spand::exit_status::kOk;
constexpr int kExitRpcError = spand::exit_status::kRuntime;  // an error status, or unreachable
constexpr int kExitUsage = spand::exit_status::kUsage;
constexpr size_t kBatchLimit = 1000;  // the server's BatchGet limit (proto comment)
constexpr const char* kDefaultServer = "127.0.0.1:50051";
// A day: now() + a larger deadline overflowed the clock's count (--timeout-ms 2^63 was negative).
constexpr uint64_t kMaxTimeoutMs = 86'400'000;

const char* const kHelp =
    "Usage: spandctl [--server HOST:PORT] [--json] [--timeout-ms MS] [--tls-ca FILE ...]\n"
    "                <command> [args]\n"
    "\n"
    "commands:\n"
    "  get ADDR... [--bytes N] [--mss N] [--b N]\n"
    "          estimate for each address or prefix (IPv4/IPv6, CIDR); with --bytes, also\n"
    "          cwnd_opt and the pacing rate for a transfer of N bytes\n"
    "  watch PREFIX... [--initial] [--count N]\n"
    "          stream updates (window changed, new inbound connection) until interrupted\n"
    "          or N events\n"
    "  top [-n N]\n"
    "          the N (default 10) prefixes with the most samples in the window\n"
    "  cwnd --wc N --segments F [--b B] ...\n"
    "          cwnd_opt computed locally (spandctl cwnd --help)\n"
    "  losses [--direction s2c|c2s|both] [--json] FLOWS.jsonl\n"
    "          TCP-SF's loss analysis of --flows-out records (spandctl losses --help)\n"
    "\n"
    "options:\n"
    "  --server HOST:PORT  estimate server (default $SPAND_SERVER, else 127.0.0.1:50051)\n"
    "  --json              JSON output (get, top: one array; watch: one object per line)\n"
    "  --timeout-ms MS     deadline of each unary call (default 5000, at most 86400000)\n"
    "  --tls-ca FILE       TLS: the CA (PEM) that signed the server's certificate\n"
    "  --tls-cert FILE     mutual TLS: this client's certificate (PEM), with --tls-key\n"
    "  --tls-key FILE      mutual TLS: its private key (PEM)\n"
    "  --tls-server-name N the name in the server's certificate, when --server is an address\n"
    "                      the certificate does not carry\n"
    "  --version           print the version, the git revision and gRPC's version\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  2  bad usage or input: an unknown option or command, a bad value, a file that cannot\n"
    "     be read (cwnd: values libspand refuses; losses: a line that is not a flow record)\n"
    "  3  runtime error: the server returned an error or could not be reached\n"
    "The numbers mean the same in every spand binary (docs/exit-status.md).\n";

struct Globals {
  std::string server;
  bool json = false;
  long timeout_ms = 5000;
  spand::ClientTls tls;
};

int usage_error(const std::string& msg) {
  std::cerr << "spandctl: " << msg << "\n(see spandctl --help)\n";
  return kExitUsage;
}

// An address or prefix argument's syntax, checked before any call so a typo is a usage error
// (exit 2, returned; 0 when the text is fine) without a server; the server applies its own
// rules on top (its prefix lengths).
int bad_target(const std::string& cmd, const std::string& text) {
  spand::net::IpText t;
  if (spand::net::parse_ip_text(text, t) == spand::net::IpTextError::kNone) return 0;
  return usage_error(cmd + ": '" + text + "' is not an IPv4 or IPv6 address or CIDR prefix");
}

bool parse_u64(const char* text, uint64_t& out) {
  if (!text || !*text || *text == '-') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

// A global option at argv[i], before or after the command: true when it is one (`i` then points
// at its value, if it takes one); a bad or missing value sets `error`.
bool global_option(int argc, char** argv, int& i, Globals& g, std::string& error) {
  const std::string a = argv[i];
  if (a == "--json") {
    g.json = true;
    return true;
  }
  std::string* text = a == "--server"            ? &g.server
                      : a == "--tls-ca"          ? &g.tls.ca_file
                      : a == "--tls-cert"        ? &g.tls.cert_file
                      : a == "--tls-key"         ? &g.tls.key_file
                      : a == "--tls-server-name" ? &g.tls.server_name
                                                 : nullptr;
  if (!text && a != "--timeout-ms") return false;
  if (i + 1 >= argc) {
    error = a + " needs a value";
    return true;
  }
  const char* value = argv[++i];
  if (text) {
    *text = value;
    return true;
  }
  uint64_t t = 0;
  if (!parse_u64(value, t) || t == 0 || t > kMaxTimeoutMs) {
    error = "--timeout-ms needs an integer in 1..86400000";
    return true;
  }
  g.timeout_ms = long(t);
  return true;
}

const char* code_name(grpc::StatusCode c) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return size_t(c) < std::size(kNames) ? kNames[c] : "UNKNOWN";
}

int rpc_error(const Globals& g, const std::string& what, const grpc::Status& st) {
  std::cerr << "spandctl: " << what << " (" << g.server << "): " << code_name(st.error_code())
            << ": " << st.error_message() << "\n";
  return kExitRpcError;
}

void set_deadline(grpc::ClientContext& ctx, const Globals& g) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(g.timeout_ms));
}

json estimate_json(const v1::Estimate& e) {
  json j = {{"prefix", e.prefix()},
            {"samples", e.samples()},
            {"wc_segments", e.wc_segments()},
            {"wc_stddev", e.wc_stddev()},
            {"rtt_samples", e.rtt_samples()},
            {"rtt_ms", e.rtt_ms()},
            {"min_rtt_ms", e.min_rtt_ms()},
            {"age_s", e.age_s()},
            {"verdict", v1::Verdict_Name(e.verdict())}};
  if (e.has_cwnd_opt()) j["cwnd_opt"] = e.cwnd_opt();
  if (e.has_pacing_rate_bps()) j["pacing_rate_bps"] = e.pacing_rate_bps();
  // The loss figures, present together (docs/api.md, "Loss figures"); timeout_pct needs a loss.
  if (e.has_flows()) {
    j["flows"] = e.flows();
    j["never4_pct"] = e.never4_pct();
    j["loss_events_fast"] = e.loss_events_fast();
    j["loss_events_timeout"] = e.loss_events_timeout();
  }
  if (e.has_timeout_pct()) j["timeout_pct"] = e.timeout_pct();
  return j;
}

void print_table_header(bool with_cwnd, const char* first = nullptr) {
  if (first) std::printf("%-15s ", first);
  std::printf("%-22s %8s %8s %8s %9s %9s %8s %-12s", "PREFIX", "SAMPLES", "WC", "STDDEV", "RTT_MS",
              "MIN_RTT", "AGE_S", "VERDICT");
  if (with_cwnd) std::printf(" %8s %14s", "CWND_OPT", "PACING_BPS");
  std::printf(" %7s %7s %7s %7s\n", "FLOWS", "NEVER4%", "LOSSES", "RTO%");
}

// The loss figures' columns: '-' where the reply has none.
void print_loss_cells(const v1::Estimate& e) {
  char flows[24] = "-", never4[24] = "-", losses[24] = "-", rto[24] = "-";
  if (e.has_flows()) {
    std::snprintf(flows, sizeof flows, "%llu", (unsigned long long)e.flows());
    std::snprintf(never4, sizeof never4, "%.1f", e.never4_pct());
    std::snprintf(losses, sizeof losses, "%llu",
                  (unsigned long long)(e.loss_events_fast() + e.loss_events_timeout()));
  }
  if (e.has_timeout_pct()) std::snprintf(rto, sizeof rto, "%.1f", e.timeout_pct());
  std::printf(" %7s %7s %7s %7s", flows, never4, losses, rto);
}

void print_table_row(const v1::Estimate& e, bool with_cwnd, const char* first = nullptr) {
  if (first) std::printf("%-15s ", first);
  std::printf("%-22s %8llu %8.2f %8.2f %9.3f %9.3f %8.1f %-12s", e.prefix().c_str(),
              (unsigned long long)e.samples(), e.wc_segments(), e.wc_stddev(), e.rtt_ms(),
              e.min_rtt_ms(), e.age_s(), v1::Verdict_Name(e.verdict()).c_str());
  if (with_cwnd) {
    std::printf(" %8u %14llu", e.cwnd_opt(), (unsigned long long)e.pacing_rate_bps());
  }
  print_loss_cells(e);
  std::printf("\n");
}

int cmd_get(const Globals& g, v1::Estimates::Stub& stub, int argc, char** argv) {
  std::vector<std::string> addresses;
  std::optional<uint64_t> bytes, mss, b;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::optional<uint64_t>& out) {
      uint64_t v = 0;
      if (i + 1 >= argc || !parse_u64(argv[i + 1], v)) return false;
      out = v;
      ++i;
      return true;
    };
    if (a == "--bytes") {
      if (!value(bytes)) return usage_error("--bytes needs a non-negative integer");
    } else if (a == "--mss") {
      if (!value(mss) || *mss == 0 || *mss > 65535) {
        return usage_error("--mss needs an integer in 1..65535");
      }
    } else if (a == "--b") {
      if (!value(b) || *b == 0 || *b > UINT32_MAX) return usage_error("--b needs an integer >= 1");
    } else if (a.starts_with("-")) {
      return usage_error("get: unknown option '" + a + "'");
    } else {
      if (const int rc = bad_target("get", a)) return rc;
      addresses.push_back(a);
    }
  }
  if (addresses.empty()) return usage_error("get: no address given");
  auto make_request = [&](const std::string& address) {
    v1::GetRequest r;
    r.set_address(address);
    if (bytes) r.set_transfer_bytes(*bytes);
    if (mss) r.set_mss(uint32_t(*mss));
    if (b) r.set_acked_per_ack(uint32_t(*b));
    return r;
  };

  std::vector<v1::Estimate> estimates;
  if (addresses.size() == 1) {
    grpc::ClientContext ctx;
    set_deadline(ctx, g);
    v1::Estimate e;
    const grpc::Status st = stub.Get(&ctx, make_request(addresses[0]), &e);
    if (!st.ok()) return rpc_error(g, "Get " + addresses[0], st);
    estimates.push_back(std::move(e));
  } else {
    for (size_t start = 0; start < addresses.size(); start += kBatchLimit) {
      v1::BatchGetRequest req;
      for (size_t i = start; i < std::min(addresses.size(), start + kBatchLimit); ++i) {
        *req.add_requests() = make_request(addresses[i]);
      }
      grpc::ClientContext ctx;
      set_deadline(ctx, g);
      v1::BatchGetResponse resp;
      const grpc::Status st = stub.BatchGet(&ctx, req, &resp);
      if (!st.ok()) return rpc_error(g, "BatchGet", st);
      for (const v1::Estimate& e : resp.estimates()) estimates.push_back(e);
    }
  }

  if (g.json) {
    json out = json::array();
    for (size_t i = 0; i < estimates.size(); ++i) {
      json j = estimate_json(estimates[i]);
      j["address"] = addresses[i];
      out.push_back(std::move(j));
    }
    std::cout << out.dump() << "\n";
  } else {
    print_table_header(bytes.has_value(), "ADDRESS");
    for (size_t i = 0; i < estimates.size(); ++i) {
      print_table_row(estimates[i], bytes.has_value(), addresses[i].c_str());
    }
  }
  return kExitOk;
}

grpc::ClientContext* g_watch_ctx = nullptr;
void on_interrupt(int) {
  if (g_watch_ctx) g_watch_ctx->TryCancel();
}

int cmd_watch(const Globals& g, v1::Estimates::Stub& stub, int argc, char** argv) {
  v1::WatchRequest req;
  uint64_t count = 0;  // 0 = until interrupted
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--initial") {
      req.set_initial(true);
    } else if (a == "--count") {
      if (i + 1 >= argc || !parse_u64(argv[i + 1], count) || count == 0) {
        return usage_error("--count needs a positive integer");
      }
      ++i;
    } else if (a.starts_with("-")) {
      return usage_error("watch: unknown option '" + a + "'");
    } else {
      if (const int rc = bad_target("watch", a)) return rc;
      req.add_prefixes(a);
    }
  }
  if (req.prefixes_size() == 0) return usage_error("watch: no prefix given");
  grpc::ClientContext ctx;
  g_watch_ctx = &ctx;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  auto reader = stub.Watch(&ctx, req);
  v1::WatchEvent ev;
  uint64_t seen = 0;
  if (!g.json) {
    std::printf("%-14s ", "EVENT");
    print_table_header(false);
    std::fflush(stdout);
  }
  while (reader->Read(&ev)) {
    if (g.json) {
      json j = estimate_json(ev.estimate());
      j["event"] = v1::WatchEvent::Reason_Name(ev.reason());
      std::cout << j.dump() << std::endl;
    } else {
      std::printf("%-14s ", v1::WatchEvent::Reason_Name(ev.reason()).c_str());
      print_table_row(ev.estimate(), false);
      std::fflush(stdout);
    }
    if (count && ++seen >= count) {
      ctx.TryCancel();
      break;
    }
  }
  const grpc::Status st = reader->Finish();
  g_watch_ctx = nullptr;
  if (count && seen >= count) return kExitOk;
  if (st.error_code() == grpc::StatusCode::CANCELLED) return kExitOk;  // interrupted
  return rpc_error(
      g, "Watch",
      st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended by the server") : st);
}

int cmd_top(const Globals& g, v1::Estimates::Stub& stub, int argc, char** argv) {
  v1::TopRequest req;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    uint64_t n = 0;
    if ((a == "-n" || a == "--limit") && i + 1 < argc && parse_u64(argv[i + 1], n) && n > 0 &&
        n <= UINT32_MAX) {
      req.set_limit(uint32_t(n));
      ++i;
    } else {
      return usage_error("top: expected [-n N] with N >= 1, got '" + a + "'");
    }
  }
  grpc::ClientContext ctx;
  set_deadline(ctx, g);
  v1::TopResponse resp;
  const grpc::Status st = stub.Top(&ctx, req, &resp);
  if (!st.ok()) return rpc_error(g, "Top", st);
  if (g.json) {
    json out = json::array();
    for (const v1::TopEntry& e : resp.prefixes()) {
      out.push_back({{"prefix", e.prefix()}, {"samples", e.samples()}});
    }
    std::cout << out.dump() << "\n";
  } else {
    std::printf("%-4s %-40s %10s\n", "RANK", "PREFIX", "SAMPLES");
    int rank = 0;
    for (const v1::TopEntry& e : resp.prefixes()) {
      std::printf("%-4d %-40s %10llu\n", ++rank, e.prefix().c_str(),
                  (unsigned long long)e.samples());
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Globals g;
  if (const char* env = std::getenv("SPAND_SERVER"); env && *env) g.server = env;
  if (g.server.empty()) g.server = kDefaultServer;

  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help" || a == "help") {
      std::cout << kHelp;
      return kExitOk;
    } else if (a == "--version") {
      spand::print_version("spandctl", {{"gRPC", grpc::Version()}});
      return kExitOk;
    }
    std::string error;
    if (!global_option(argc, argv, i, g, error)) break;
    if (!error.empty()) return usage_error(error);
  }
  if (i >= argc) {
    std::cerr << kHelp;
    return kExitUsage;
  }
  const std::string cmd = argv[i];
  if (cmd == "cwnd") return spand::spandctl_cwnd_main(argc - i, argv + i);
  if (cmd == "losses") return spand::spandctl_losses_main(argc - i, argv + i);

  // Options may also follow the command ("spandctl get 1.2.3.4 --json --server X").
  std::vector<char*> rest;
  for (int j = i + 1; j < argc; ++j) {
    const std::string a = argv[j];
    std::string error;
    if (global_option(argc, argv, j, g, error)) {
      if (!error.empty()) return usage_error(error);
    } else if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return kExitOk;
    } else {
      rest.push_back(argv[j]);
    }
  }
  const int rest_argc = int(rest.size());
  char** rest_argv = rest.data();

  if (cmd != "get" && cmd != "watch" && cmd != "top") {
    return usage_error("unknown command '" + cmd + "'");
  }
  std::string error;
  auto channel = spand::make_client_channel(g.server, g.tls, "--tls-", error);
  if (!channel) return usage_error(error);
  auto stub = v1::Estimates::NewStub(channel);
  if (cmd == "get") return cmd_get(g, *stub, rest_argc, rest_argv);
  if (cmd == "watch") return cmd_watch(g, *stub, rest_argc, rest_argv);
  return cmd_top(g, *stub, rest_argc, rest_argv);
}
