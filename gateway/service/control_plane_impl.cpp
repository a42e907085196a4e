// make_control_plane(): the gateway's control plane over ServiceStack. Time is capture time,
// advanced by tick(); the estimate service therefore answers "as of the newest packet".
#include <memory>

#include "control_plane.hpp"
#include "stack.hpp"

namespace spand {
namespace {

class GatewayControlPlane final : public ControlPlane {
 public:
  bool init(const ControlOptions& opts, std::string& error) {
    StackOptions so;
    so.control = opts;
    so.watch_refresh_ms = opts.flush_interval_ms;
    stack_ = ServiceStack::create(so, clock_, error);
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

  void tick(uint64_t capture_now_ns, const std::vector<const Worker*>& workers) override {
    clock_.advance_to(capture_now_ns);
    stack_->tick(capture_now_ns);
    // Plain reads of the workers' monotonic counters (DPDK telemetry style); a handful of
    // additions per worker, so every tick, and the last tick before finish() is exact.
    stack_->set_capture_totals(sum_counters(workers));
  }

  void finish(bool keep_serving) override {
    stack_->finish();
    if (!keep_serving) stack_->shutdown();
  }

 private:
  SettableClock clock_;
  std::unique_ptr<ServiceStack> stack_;
};

} // namespace

std::unique_ptr<ControlPlane> make_control_plane(const ControlOptions& opts, std::string& error) {
  auto cp = std::make_unique<GatewayControlPlane>();
  if (!cp->init(opts, error)) return nullptr;
  return cp;
}

} // namespace spand
