#include "service/service.hpp"

#include <absl/synchronization/mutex.h>
#include <grpcpp/alarm.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "service/address.hpp"

namespace spand {
namespace {

// How often a Watch stream wakes without events to notice a cancelled client.
constexpr uint32_t kWatchPollMs = 200;

// Calls of each method kept requested on every completion queue: an arriving call is matched at
// once, and each one taken is replaced.
constexpr size_t kRequestedCalls = 64;
constexpr size_t kRequestedBatchCalls = 8;

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
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  Metrics* metrics_;
  RpcMethod method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

// grpc.health.v1 for "" and "spand.v1.Estimates", always SERVING while the server runs. Served
// here on the synchronous API: gRPC's default health service uses the callback API, whose
// completion queue brings threads of its own that then take part in polling every connection
// and hand requests over to the service's threads (a wakeup per call).
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Response = grpc::health::v1::HealthCheckResponse;

  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* req,
                     Response* out) override {
    if (!known(req->service())) return {grpc::StatusCode::NOT_FOUND, "unknown service"};
    out->set_status(Response::SERVING);
    return grpc::Status::OK;
  }
  // The status never changes while the server runs: one message, then the stream stays open
  // until the client leaves or stop() is called.
  grpc::Status Watch(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::ServerWriter<Response>* writer) override {
    Response r;
    r.set_status(known(req->service()) ? Response::SERVING : Response::SERVICE_UNKNOWN);
    if (!writer->Write(r)) return grpc::Status::CANCELLED;
    std::unique_lock lock(mu_);
    while (!stopped_ && !ctx->IsCancelled()) {
      cv_.wait_for(lock, std::chrono::milliseconds(kWatchPollMs));
    }
    if (!stopped_) return grpc::Status::CANCELLED;
    r.set_status(Response::NOT_SERVING);
    writer->Write(r);
    return {grpc::StatusCode::UNAVAILABLE, "server is shutting down"};
  }
  void stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  static bool known(const std::string& service) {
    return service.empty() || service == v1::Estimates::service_full_name();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;  // guarded by mu_
};

// One completion queue and the thread that polls it. Calls finished on another thread (the
// store's readers) wait in `done` until that thread sends their replies; `wakeup` (an alarm
// already due) brings it the batch. Only one wakeup is outstanding at a time, so a reader that
// finishes many calls in a row wakes the polling thread once.
struct EstimatesService::Poller {
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::thread thread;
  std::mutex mu;
  std::vector<Rpc*> done;  // guarded by mu
  bool armed = false;      // guarded by mu: `wakeup` is set and not yet delivered
  grpc::Alarm wakeup;
};

namespace {
// The poller whose thread is running here, if any.
thread_local const void* tl_poller = nullptr;
}  // namespace

// One call of Get or BatchGet, from its request to its reply. Its tag is itself: first for the
// call's arrival, then for the reply's completion.
class EstimatesService::Rpc {
 public:
  Rpc(EstimatesService& svc, Poller& p) : svc_(svc), poller_(p) {}
  virtual ~Rpc() = default;
  // On the polling thread: the call arrived (ok false: the server is shutting down).
  virtual void arrived(bool ok) = 0;
  // On the polling thread: sends the reply; the next event deletes the call.
  virtual void reply() = 0;
  void event(bool ok) {
    if (replying_) {
      delete this;
      return;
    }
    replying_ = true;
    arrived(ok);
  }

 protected:
  // The core is done with the call: reply now on the polling thread, else hand it over.
  void finished(const grpc::Status& st) {
    status_ = st;
    if (tl_poller == &poller_) {
      reply();
      return;
    }
    Poller& p = poller_;  // `this` may be gone once it is in the queue
    std::lock_guard lock(p.mu);
    p.done.push_back(this);
    if (!p.armed) {
      p.armed = true;
      p.wakeup.Set(p.cq.get(), gpr_inf_past(GPR_CLOCK_MONOTONIC), &p);
    }
  }

  EstimatesService& svc_;
  Poller& poller_;
  grpc::ServerContext ctx_;
  grpc::Status status_;
  bool replying_ = false;
};

class EstimatesService::GetRpc final : public Rpc, public GetCall {
 public:
  GetRpc(EstimatesService& svc, Poller& p)
      : Rpc(svc, p), timer_(svc.metrics_, RpcMethod::kGet), responder_(&ctx_) {
    svc.RequestGet(&ctx_, &req_, &responder_, p.cq.get(), p.cq.get(), this);
  }
  void arrived(bool success) override {
    if (!success) {
      delete this;
      return;
    }
    new GetRpc(svc_, poller_);  // the next call of the method
    timer_.restart();
    svc_.core_.start_get(req_, reply_, *this);
  }
  void finish(const grpc::Status& st) override { finished(st); }
  void reply() override {
    if (status_.ok() && timer_.metrics()) timer_.metrics()->count_estimate(reply_.verdict());
    responder_.Finish(reply_, timer_.done(status_), this);
  }

 private:
  CallTimer timer_;
  v1::GetRequest req_;
  v1::Estimate reply_;
  grpc::ServerAsyncResponseWriter<v1::Estimate> responder_;
};

class EstimatesService::BatchGetRpc final : public Rpc, public BatchGetCall {
 public:
  BatchGetRpc(EstimatesService& svc, Poller& p)
      : Rpc(svc, p), timer_(svc.metrics_, RpcMethod::kBatchGet), responder_(&ctx_) {
    svc.RequestBatchGet(&ctx_, &req_, &responder_, p.cq.get(), p.cq.get(), this);
  }
  void arrived(bool success) override {
    if (!success) {
      delete this;
      return;
    }
    new BatchGetRpc(svc_, poller_);
    timer_.restart();
    svc_.core_.start_batch_get(req_, reply_, *this);
  }
  void finish(const grpc::Status& st) override { finished(st); }
  void reply() override {
    if (status_.ok() && timer_.metrics()) {
      for (const v1::Estimate& e : reply_.estimates())
        timer_.metrics()->count_estimate(e.verdict());
    }
    responder_.Finish(reply_, timer_.done(status_), this);
  }

 private:
  CallTimer timer_;
  v1::BatchGetRequest req_;
  v1::BatchGetResponse reply_;
  grpc::ServerAsyncResponseWriter<v1::BatchGetResponse> responder_;
};

EstimatesService::EstimatesService(EstimatesCore& core, WatchHub& hub, Metrics* metrics,
                                   size_t polling_threads)
    : polling_threads_(std::max<size_t>(polling_threads, 1)),
      health_(std::make_unique<HealthService>()),
      core_(core),
      hub_(hub),
      metrics_(metrics) {}

void EstimatesService::stop_health_watches() {
  health_->stop();
}

EstimatesService::~EstimatesService() {
  for (auto& p : pollers_) p->cq->Shutdown();
  for (auto& p : pollers_) {
    if (p->thread.joinable()) {
      p->thread.join();
    } else {  // never started: drain the queue here
      void* tag;
      bool ok;
      while (p->cq->Next(&tag, &ok)) {
      }
    }
  }
}

void EstimatesService::add_completion_queues(grpc::ServerBuilder& builder) {
  for (size_t i = 0; i < polling_threads_; ++i) {
    auto p = std::make_unique<Poller>();
    p->cq = builder.AddCompletionQueue();
    pollers_.push_back(std::move(p));
  }
}

void EstimatesService::start_polling() {
  for (auto& p : pollers_) {
    for (size_t i = 0; i < kRequestedCalls; ++i) new GetRpc(*this, *p);
    for (size_t i = 0; i < kRequestedBatchCalls; ++i) new BatchGetRpc(*this, *p);
    p->thread = std::thread([this, poller = p.get()] { poll(*poller); });
  }
}

void EstimatesService::poll(Poller& p) {
  pthread_setname_np(pthread_self(), "spand-grpc");
  tl_poller = &p;
  std::vector<Rpc*> batch;
  void* tag;
  bool ok;
  while (p.cq->Next(&tag, &ok)) {
    if (tag != &p) {
      static_cast<Rpc*>(tag)->event(ok);
      continue;
    }
    {
      std::lock_guard lock(p.mu);
      p.armed = false;
      batch.swap(p.done);
    }
    for (Rpc* r : batch) r->reply();
    batch.clear();
  }
}

grpc::Status EstimatesService::Top(grpc::ServerContext*, const v1::TopRequest* req,
                                   v1::TopResponse* reply) {
  CallTimer t(metrics_, RpcMethod::kTop);
  return t.done(core_.top(*req, *reply));
}

grpc::Status EstimatesService::Report(grpc::ServerContext* ctx,
                                      grpc::ServerReader<v1::ReportSample>* reader,
                                      v1::ReportSummary* reply) {
  CallTimer t(metrics_, RpcMethod::kReport);
  if (!report_token_.empty()) {
    // Report writes into every client's estimate: only authenticated agents may call it.
    const auto& md = ctx->client_metadata();
    const auto it = md.find("authorization");
    const std::string want = "Bearer " + report_token_;
    bool ok = it != md.end() && it->second.size() == want.size();
    if (ok) {  // constant time in the token's length
      unsigned char diff = 0;
      for (size_t i = 0; i < want.size(); ++i) diff |= uint8_t(it->second.data()[i] ^ want[i]);
      ok = diff == 0;
    }
    if (!ok) {
      return t.done({grpc::StatusCode::UNAUTHENTICATED,
                     "Report needs 'authorization: Bearer <token>' (--report-token-file)"});
    }
  }
  if (!core_.can_report()) {
    return t.done({grpc::StatusCode::UNIMPLEMENTED, "this server has no sample writer"});
  }
  if (const std::string why = core_.report_refused(); !why.empty()) {
    return t.done({grpc::StatusCode::FAILED_PRECONDITION, why});
  }
  // The rate limit's key: the certificate's identity under mutual TLS, else the peer address
  // without its port ("ipv4:10.0.0.5:41234" -> "ipv4:10.0.0.5").
  std::string caller;
  if (const auto auth = ctx->auth_context(); auth && auth->IsPeerAuthenticated()) {
    for (const auto& id : auth->GetPeerIdentity()) caller.append(id.data(), id.size());
    caller = "cert:" + caller;
  } else {
    caller = ctx->peer();
    if (const size_t colon = caller.rfind(':'); colon != std::string::npos) caller.resize(colon);
  }
  v1::ReportSample msg;
  while (reader->Read(&msg)) core_.report(msg, *reply, caller);
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

namespace {
bool read_file(const std::string& path, const char* option, std::string& out, std::string& error) {
  out.clear();
  if (path.empty()) return true;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  if (in) ss << in.rdbuf();
  if (!in || ss.str().empty()) {
    error = std::string(option) + ": cannot read '" + path + "'";
    return false;
  }
  out = ss.str();
  return true;
}
}  // namespace

bool read_grpc_security(const std::string& cert_file, const std::string& key_file,
                        const std::string& client_ca_file, const std::string& token_file,
                        GrpcSecurity& out, std::string& error) {
  out = GrpcSecurity{};
  if (cert_file.empty() != key_file.empty()) {
    error = "--grpc-tls-cert and --grpc-tls-key go together";
    return false;
  }
  if (!client_ca_file.empty() && cert_file.empty()) {
    error = "--grpc-client-ca needs --grpc-tls-cert and --grpc-tls-key";
    return false;
  }
  if (!read_file(cert_file, "--grpc-tls-cert", out.cert_pem, error) ||
      !read_file(key_file, "--grpc-tls-key", out.key_pem, error) ||
      !read_file(client_ca_file, "--grpc-client-ca", out.client_ca_pem, error) ||
      !read_file(token_file, "--report-token-file", out.report_token, error))
    return false;
  out.cert_file = cert_file;
  out.key_file = key_file;
  out.client_ca_file = client_ca_file;
  // The token is the file's first line.
  if (const size_t nl = out.report_token.find_first_of("\r\n"); nl != std::string::npos)
    out.report_token.resize(nl);
  if (!token_file.empty() && out.report_token.empty()) {
    error = "--report-token-file: the first line of '" + token_file + "' is empty";
    return false;
  }
  return true;
}

std::unique_ptr<grpc::Server> start_grpc_server(const std::string& listen,
                                                EstimatesService& service, int& bound_port,
                                                std::string& error, const GrpcSecurity& security) {
  // Debian's Abseil is built with its debug checks on: every absl::Mutex operation in gRPC then
  // updates a process-wide lock graph (GraphCycles, behind one spin lock) to detect lock-order
  // inversions, several percent of the service's CPU under load. A debugging aid only.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(false);  // HealthService above instead
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC takes "host:99999" and serves on the port modulo 65536: refuse it here.
  {
    const size_t colon = listen.rfind(':');
    const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
    unsigned long value = 0;
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (digits) value = std::stoul(port);
    if (!digits || value > 65535) {
      error = "gRPC listen address '" + listen + "': the port must be 0-65535";
      return nullptr;
    }
  }
  grpc::ServerBuilder builder;
  bound_port = 0;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!security.cert_file.empty() && !security.key_file.empty()) {
    // From files: watched, so a renewed certificate or CA needs no restart.
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.key_file, security.cert_file, security.client_ca_file,
        std::max(1u, security.reload_s));
    grpc::experimental::TlsServerCredentialsOptions tls(provider);
    tls.watch_identity_key_cert_pairs();
    if (!security.client_ca_file.empty()) {
      tls.watch_root_certs();
      tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    creds = grpc::experimental::TlsServerCredentials(tls);
  } else if (!security.cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        security.client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = security.client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  }
  service.report_token_ = security.report_token;
  builder.AddListeningPort(listen, creds, &bound_port);
  builder.RegisterService(&service);
  builder.RegisterService(service.health_.get());
  service.add_completion_queues(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    error = "cannot listen for gRPC on '" + listen + "'";
    return nullptr;
  }
  service.start_polling();
  return server;
}

}  // namespace spand
