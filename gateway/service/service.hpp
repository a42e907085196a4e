// spand.v1.Estimates over gRPC: thin handlers that time each call for the metrics and delegate
// to EstimatesCore (requests) and WatchHub (streams). Get and BatchGet use the asynchronous API
// on completion queues of the service's own, each polled by one thread that handles a request
// in-line (parse, cache, or queue the store read) and sends every reply: a call waiting on Redis
// holds no thread, and the reader threads of the store hand finished calls back to the polling
// thread in batches (one wakeup per batch), so gRPC's call and transport work all stays on the
// polling threads. Watch, Report and Top stay on the synchronous API (its thread pool).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "service/estimates_core.hpp"
#include "service/metrics.hpp"
#include "service/watch_hub.hpp"
#include "spand/v1/estimates.grpc.pb.h"

namespace spand {

class HealthService;

// Transport security of the gRPC endpoint (docs/api.md, "Security"). All PEM text, not paths
// (read_grpc_security() reads the files). Empty cert/key: plaintext. With client_ca: mutual TLS,
// every client must present a certificate signed by it.
struct GrpcSecurity {
  std::string cert_pem;       // server certificate chain
  std::string key_pem;        // its private key
  std::string client_ca_pem;  // non-empty: require and verify client certificates
  std::string report_token;   // non-empty: Report needs "authorization: Bearer <token>"
  // The files the PEM came from (read_grpc_security): when set, the server watches them and
  // takes a new certificate, key or client CA within reload_s seconds of a change (gRPC's
  // FileWatcherCertificateProvider; replace the files atomically, e.g. rename into place).
  std::string cert_file, key_file, client_ca_file;
  unsigned reload_s = 60;
};

using EstimatesServiceBase = v1::Estimates::WithAsyncMethod_Get<
    v1::Estimates::WithAsyncMethod_BatchGet<v1::Estimates::Service>>;

class EstimatesService final : public EstimatesServiceBase {
 public:
  // `metrics` may be null (tests). `polling_threads`: completion queues for Get and BatchGet,
  // one thread each.
  EstimatesService(EstimatesCore& core, WatchHub& hub, Metrics* metrics,
                   size_t polling_threads = kDefaultPollingThreads);
  // Shuts the completion queues down and joins their threads: destroy (or Shutdown) the
  // grpc::Server first, as gRPC requires.
  ~EstimatesService() override;
  EstimatesService(const EstimatesService&) = delete;
  EstimatesService& operator=(const EstimatesService&) = delete;

  static constexpr size_t kDefaultPollingThreads = 1;

  // Ends the health service's Watch streams, before grpc::Server::Shutdown.
  void stop_health_watches();

  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::WatchEvent>* writer) override;
  grpc::Status Report(grpc::ServerContext* ctx, grpc::ServerReader<v1::ReportSample>* reader,
                      v1::ReportSummary* reply) override;
  grpc::Status Top(grpc::ServerContext* ctx, const v1::TopRequest* req,
                   v1::TopResponse* reply) override;

 private:
  friend std::unique_ptr<grpc::Server> start_grpc_server(const std::string&, EstimatesService&,
                                                         int&, std::string&, const GrpcSecurity&);
  std::string report_token_;  // set by start_grpc_server; "" = Report needs no token
  struct Poller;
  class Rpc;
  class GetRpc;
  class BatchGetRpc;
  // Before BuildAndStart: one completion queue per polling thread.
  void add_completion_queues(grpc::ServerBuilder& builder);
  // After BuildAndStart: requests the first calls and starts the polling threads.
  void start_polling();
  void poll(Poller& p);

  grpc::Status watch(grpc::ServerContext* ctx, const v1::WatchRequest& req,
                     grpc::ServerWriter<v1::WatchEvent>& writer);

  std::vector<std::unique_ptr<Poller>> pollers_;
  size_t polling_threads_;
  std::unique_ptr<HealthService> health_;
  EstimatesCore& core_;
  WatchHub& hub_;
  Metrics* metrics_;
};

// Fills `out` from files ("" = not set). False with `error` (naming the option) on an unreadable
// file, a key without a certificate or the reverse, or a client CA without a server certificate.
bool read_grpc_security(const std::string& cert_file, const std::string& key_file,
                        const std::string& client_ca_file, const std::string& token_file,
                        GrpcSecurity& out, std::string& error);

// Builds a server with the service, the standard health service and server reflection.
// Returns nullptr with `error` set when `listen` cannot be bound; `bound_port` gets the port
// (useful with ":0").
std::unique_ptr<grpc::Server> start_grpc_server(const std::string& listen,
                                                EstimatesService& service, int& bound_port,
                                                std::string& error,
                                                const GrpcSecurity& security = {});

}  // namespace spand
