// spand-agent: applies TCP/SPAND estimates to this server's kernel. A thin shell over
// AgentCore that runs the agent's steps in order, each in the file named after it:
//   command_line.cpp     flags and the configuration file, --help, --version, --print-config
//   host_checks.cpp      privileges, the cgroup2 mount, the kernel's HZ
//   estimate_client.cpp  the estimate file or the spand.v1 service's client
//   kernel_setup.cpp     the pin-directory lock, pacing classes, BPF load and attach, or routes
//   metrics.cpp          /metrics
//   report_socket.cpp    spand_report()'s socket
//   congestion_control.cpp  Scalable TCP registered, the kernel's congestion controls
//   agent_loop.cpp       the main loop (path_readings.cpp, tcp_info_report.cpp on their timers)
// and the shutdown below, which removes everything the agent installed.
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent_core.hpp"
#include "agent_loop.hpp"
#include "command_line.hpp"
#include "congestion_control.hpp"
#include "estimate_client.hpp"
#include "exit_codes.hpp"
#include "host_checks.hpp"
#include "kernel_setup.hpp"
#include "logging_applier.hpp"
#include "metrics.hpp"
#include "prefix_map.hpp"
#include "report_socket.hpp"
#include "spand_version.hpp"
#ifdef SPAND_AGENT_GRPC
#include <grpcpp/grpcpp.h>
#endif

namespace spand::agent {
namespace {

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

void print_versions() {
  std::vector<std::pair<std::string, std::string>> libs;
  libs.emplace_back("libbpf", std::to_string(libbpf_major_version()) + "." +
                                  std::to_string(libbpf_minor_version()));
#ifdef SPAND_AGENT_GRPC
  libs.emplace_back("gRPC", grpc::Version());
#endif
  print_version("spand-agent", libs);
}

// `listen` empty: no /metrics. false (after saying why) when the listener cannot start.
bool start_metrics(const std::string& listen, std::unique_ptr<AgentMetrics>& out) {
  if (listen.empty()) return true;
  try {
    out = std::make_unique<AgentMetrics>(listen);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "spand-agent: /metrics on %s: %s\n", listen.c_str(), ex.what());
    return false;
  }
  return true;
}

int run(int argc, char** argv) {
  CommandLine cl;
  if (auto code = parse_command_line(argc, argv, cl)) {
    if (cl.version) print_versions();
    return *code;
  }
  AgentConfig& cfg = cl.cfg;
  // Network-aware clustering: a bad map is a usage error, said before anything is set up.
  std::unique_ptr<PrefixMapFile> prefix_map;
  if (!cfg.prefix_map.empty()) {
    prefix_map = std::make_unique<PrefixMapFile>(cfg.prefix_map);
    std::string error;
    if (!prefix_map->load(error)) {
      std::fprintf(stderr, "spand-agent: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  if (auto code = check_privileges(cfg)) return *code;
  complete_from_host(cfg);

  EstimateClient estimates;
  if (auto code = open_estimate_client(cfg, estimates)) return *code;

  KernelSetup kernel;
  if (auto code = start_kernel(cfg, kernel)) return *code;
  // A dry run's applier says "dry-run: apply ..." itself: nothing is logged as applied.
  LoggingApplier logging(*kernel.kernel);
  KernelApplier& logged = cfg.dry_run ? *kernel.kernel : logging;

  std::unique_ptr<AgentMetrics> metrics;
  if (!start_metrics(cfg.metrics_listen, metrics)) {
    kernel.undo();
    return kExitRuntime;
  }
  ReportSocket report_socket;
  if (!cfg.report_socket.empty() && !cfg.dry_run && !report_socket.open(cfg.report_socket))
    std::fprintf(stderr, "spand-agent: report socket %s: %s\n", cfg.report_socket.c_str(),
                 std::strerror(errno));
  install_stop_handlers();

  // Scalable TCP as a BPF congestion control, before the core reads the available list.
  CongestionControls ccs;
  if (auto code = ccs.start(cfg)) {
    kernel.undo();
    return *code;
  }
  SteadyClock clock;
  AgentCore core(cfg, *estimates.source, logged, clock, ccs.available());
  if (prefix_map) {
    core.set_prefix_map(prefix_map->map());
    std::fprintf(stderr, "spand-agent: prefix map %s: %zu prefixes\n", cfg.prefix_map.c_str(),
                 prefix_map->map()->size());
  }
  std::fprintf(
      stderr, "spand-agent: running mode=%s cgroup=%s source=%s\n", kernel.kernel->name(),
      kernel.bpf ? cfg.cgroup_path.c_str() : "-",
      cfg.estimates_file.empty() ? cfg.estimate_server.c_str() : cfg.estimates_file.c_str());

  run_loop(
      {cfg, core, clock, kernel, estimates.grpc, metrics.get(), report_socket, prefix_map.get()},
      cl.once);

  // Shutdown, in the order that leaves no socket pointing at something gone: the policies and
  // the program first, then what the program selects (Scalable TCP, the pacing classes).
  std::fprintf(stderr, "spand-agent: stopping, removing %zu policies\n", core.installed());
  core.shutdown();
  ccs.stop();
  kernel.pacing.reset();
  report_socket.close();
  std::fprintf(stderr, "spand-agent: stopped\n");
  return kExitOk;
}

}  // namespace
}  // namespace spand::agent

int main(int argc, char** argv) {
  return spand::agent::run(argc, argv);
}
