// make_control_plane(): the gateway's control plane over ServiceStack. Time is capture time,
// advanced by tick(); the estimate service therefore answers "as of the newest packet".
#include "control/control_plane.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "capture/port_drops.hpp"
#include "control/service_stack.hpp"

namespace spand {
namespace {

std::atomic<bool> g_stop{false};
void on_stop_signal(int) {
  g_stop = true;
}

class GatewayControlPlane final : public ControlPlane {
 public:
  bool init(const ControlOptions& opts, std::string& error, int* status) {
    StackOptions so;
    so.control = opts;
    so.watch_refresh_ms = opts.flush_interval_ms;
    so.program = "spand-gateway";
    stack_ = ServiceStack::create(so, clock_, error, status);
    return stack_ != nullptr;
  }

  void on_sample(const Sample& s) override {
    if (s.kind == SampleKind::kNewConnection) {
      stack_->new_connection(s.client);
      return;
    }
    stack_->add(s);
  }

  void on_new_connection(const IpAddr& client, uint64_t ts_ns) override {
    clock_.advance_to(ts_ns);
    stack_->new_connection(client);
  }

  void on_flow(const FlowRecord& r) override { stack_->add_flow(r); }

  void tick(uint64_t capture_now_ns, const std::vector<const Worker*>& workers) override {
    clock_.advance_to(capture_now_ns);
    stack_->tick(capture_now_ns);
    // Plain reads of the workers' monotonic counters (DPDK telemetry style); a handful of
    // additions per worker, so every tick, and the last tick before finish() is exact.
    stack_->set_capture_totals(total_counters(workers));
    stack_->set_port_drops(port_drops().snapshot());
  }

  // With keep_serving (a replay followed by queries), blocks until SIGINT or SIGTERM, still
  // writing agents' Report samples; main() returns right after finish().
  bool finish(bool keep_serving) override {
    bool ok = stack_->finish();
    if (keep_serving) {
      g_stop = false;
      std::signal(SIGINT, on_stop_signal);
      std::signal(SIGTERM, on_stop_signal);
      std::fprintf(stderr, "spand-gateway: input done; serving until SIGINT/SIGTERM\n");
      while (!g_stop) {
        stack_->tick(clock_.now_ns());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ok = stack_->finish();  // the backlog may have drained since: the last word counts
    }
    stack_->shutdown();
    return ok;
  }

 private:
  SettableClock clock_;
  std::unique_ptr<ServiceStack> stack_;
};

}  // namespace

std::unique_ptr<ControlPlane> make_control_plane(const ControlOptions& opts, std::string& error,
                                                 int* status) {
  auto cp = std::make_unique<GatewayControlPlane>();
  if (!cp->init(opts, error, status)) return nullptr;
  return cp;
}

}  // namespace spand
