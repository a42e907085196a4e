#include "service.hpp"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "address.hpp"

namespace spand {
namespace {

// How often a Watch stream wakes without events to notice a cancelled client.
constexpr uint32_t kWatchPollMs = 200;

class CallTimer {
 public:
  CallTimer(Metrics* m, RpcMethod method)
      : metrics_(m), method_(method), start_(std::chrono::steady_clock::now()) {}
  grpc::Status done(grpc::Status st) {
    if (metrics_) {
      const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
      metrics_->observe_rpc(method_, st.error_code(), d.count());
    }
    return st;
  }
  Metrics* metrics() const { return metrics_; }

 private:
  Metrics* metrics_;
  RpcMethod method_;
  std::chrono::steady_clock::time_point start_;
};

// The reactor of one Get: started by the handler, finished by the core (inline on a cache hit,
// else from the store's reader thread), deleted by gRPC when the call is over.
class GetReactor final : public grpc::ServerUnaryReactor, public GetCall {
 public:
  GetReactor(Metrics* m, v1::Estimate* reply) : timer_(m, RpcMethod::kGet), reply_(reply) {}
  void finish(const grpc::Status& st) override {
    if (st.ok() && timer_.metrics()) timer_.metrics()->count_estimate(reply_->verdict());
    Finish(timer_.done(st));  // may delete this: nothing after
  }
  void OnDone() override { delete this; }

 private:
  CallTimer timer_;
  v1::Estimate* reply_;
};

class BatchGetReactor final : public grpc::ServerUnaryReactor, public BatchGetCall {
 public:
  BatchGetReactor(Metrics* m, v1::BatchGetResponse* reply)
      : timer_(m, RpcMethod::kBatchGet), reply_(reply) {}
  void finish(const grpc::Status& st) override {
    if (st.ok() && timer_.metrics()) {
      for (const v1::Estimate& e : reply_->estimates())
        timer_.metrics()->count_estimate(e.verdict());
    }
    Finish(timer_.done(st));
  }
  void OnDone() override { delete this; }

 private:
  CallTimer timer_;
  v1::BatchGetResponse* reply_;
};

}  // namespace

EstimatesService::EstimatesService(EstimatesCore& core, WatchHub& hub, Metrics* metrics)
    : core_(core), hub_(hub), metrics_(metrics) {}

grpc::ServerUnaryReactor* EstimatesService::Get(grpc::CallbackServerContext*,
                                                const v1::GetRequest* req, v1::Estimate* reply) {
  auto* r = new GetReactor(metrics_, reply);
  core_.start_get(*req, *reply, *r);
  return r;
}

grpc::ServerUnaryReactor* EstimatesService::BatchGet(grpc::CallbackServerContext*,
                                                     const v1::BatchGetRequest* req,
                                                     v1::BatchGetResponse* reply) {
  auto* r = new BatchGetReactor(metrics_, reply);
  core_.start_batch_get(*req, *reply, *r);
  return r;
}

grpc::Status EstimatesService::Top(grpc::ServerContext*, const v1::TopRequest* req,
                                   v1::TopResponse* reply) {
  CallTimer t(metrics_, RpcMethod::kTop);
  return t.done(core_.top(*req, *reply));
}

grpc::Status EstimatesService::Report(grpc::ServerContext*,
                                      grpc::ServerReader<v1::ReportSample>* reader,
                                      v1::ReportSummary* reply) {
  CallTimer t(metrics_, RpcMethod::kReport);
  if (!core_.can_report()) {
    return t.done({grpc::StatusCode::UNIMPLEMENTED, "this server has no sample writer"});
  }
  v1::ReportSample msg;
  while (reader->Read(&msg)) core_.report(msg, *reply);
  return t.done(grpc::Status::OK);
}

grpc::Status EstimatesService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                                     grpc::ServerWriter<v1::WatchEvent>* writer) {
  CallTimer t(metrics_, RpcMethod::kWatch);
  return t.done(watch(ctx, *req, *writer));
}

grpc::Status EstimatesService::watch(grpc::ServerContext* ctx, const v1::WatchRequest& req,
                                     grpc::ServerWriter<v1::WatchEvent>& writer) {
  if (req.prefixes_size() == 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "no prefix to watch"};
  }
  if (size_t(req.prefixes_size()) > kMaxWatchPrefixes) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::to_string(req.prefixes_size()) +
                                                    " prefixes exceed the limit of " +
                                                    std::to_string(kMaxWatchPrefixes)};
  }
  std::vector<Prefix> prefixes;
  for (int i = 0; i < req.prefixes_size(); ++i) {
    Prefix p;
    std::string error;
    if (!parse_target(req.prefixes(i), core_.options().prefix, p, error)) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "prefixes[" + std::to_string(i) + "]: " + error};
    }
    if (std::find(prefixes.begin(), prefixes.end(), p) == prefixes.end()) prefixes.push_back(p);
  }
  auto sub = hub_.subscribe(prefixes);
  struct Unsubscribe {
    WatchHub& hub;
    std::shared_ptr<WatchHub::Subscription> sub;
    ~Unsubscribe() { hub.unsubscribe(sub); }
  } unsubscribe{hub_, sub};

  for (const Prefix& p : prefixes) {
    v1::WatchEvent ev;
    if (grpc::Status st = core_.estimate_prefix(p, false, *ev.mutable_estimate()); !st.ok()) {
      return st;
    }
    hub_.seed(p, ev.estimate());
    if (req.initial()) {
      ev.set_reason(v1::WatchEvent::INITIAL);
      if (!writer.Write(ev)) return grpc::Status::CANCELLED;
    }
  }
  // Headers go out even when nothing is initial, so the client knows it is subscribed.
  if (!req.initial()) writer.SendInitialMetadata();

  while (!ctx->IsCancelled()) {
    std::vector<WatchHub::Event> events = sub->wait(kWatchPollMs);
    if (sub->stopped()) return {grpc::StatusCode::UNAVAILABLE, "server is shutting down"};
    for (WatchHub::Event& e : events) {
      v1::WatchEvent ev;
      ev.set_reason(e.reason);
      if (e.reason == v1::WatchEvent::NEW_CONNECTION) {
        if (!core_.estimate_prefix(e.prefix, true, *ev.mutable_estimate()).ok()) continue;
      } else {
        *ev.mutable_estimate() = std::move(e.estimate);
      }
      if (!writer.Write(ev)) return grpc::Status::CANCELLED;
    }
  }
  return grpc::Status::CANCELLED;
}

std::unique_ptr<grpc::Server> start_grpc_server(const std::string& listen,
                                                EstimatesService& service, int& bound_port,
                                                std::string& error) {
  // Debian's Abseil is built with its debug checks on: every absl::Mutex operation in gRPC then
  // updates a process-wide lock graph (GraphCycles, behind one spin lock) to detect lock-order
  // inversions, several percent of the service's CPU under load. A debugging aid only.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  bound_port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    error = "cannot listen for gRPC on '" + listen + "'";
    return nullptr;
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  server->GetHealthCheckService()->SetServingStatus("spand.v1.Estimates", true);
  return server;
}

}  // namespace spand
