// spand.v1.Estimates over gRPC: thin handlers that time each call for the metrics and delegate
// to EstimatesCore (requests) and WatchHub (streams). Get and BatchGet use the callback API: a
// call waiting on Redis holds no thread, its reply is sent from the store read's completion.
// Watch, Report and Top stay on the synchronous API (its thread pool).
#pragma once

#include <grpcpp/grpcpp.h>

#include "core.hpp"
#include "metrics.hpp"
#include "spand/v1/estimates.grpc.pb.h"
#include "watch_hub.hpp"

namespace spand {

using EstimatesServiceBase = v1::Estimates::WithCallbackMethod_Get<
    v1::Estimates::WithCallbackMethod_BatchGet<v1::Estimates::Service>>;

class EstimatesService final : public EstimatesServiceBase {
 public:
  // `metrics` may be null (tests).
  EstimatesService(EstimatesCore& core, WatchHub& hub, Metrics* metrics);

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::GetRequest* req,
                                v1::Estimate* reply) override;
  grpc::ServerUnaryReactor* BatchGet(grpc::CallbackServerContext* ctx,
                                     const v1::BatchGetRequest* req,
                                     v1::BatchGetResponse* reply) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::WatchEvent>* writer) override;
  grpc::Status Report(grpc::ServerContext* ctx, grpc::ServerReader<v1::ReportSample>* reader,
                      v1::ReportSummary* reply) override;
  grpc::Status Top(grpc::ServerContext* ctx, const v1::TopRequest* req,
                   v1::TopResponse* reply) override;

 private:
  grpc::Status watch(grpc::ServerContext* ctx, const v1::WatchRequest& req,
                     grpc::ServerWriter<v1::WatchEvent>& writer);

  EstimatesCore& core_;
  WatchHub& hub_;
  Metrics* metrics_;
};

// Builds a server with the service, the standard health service and server reflection.
// Returns nullptr with `error` set when `listen` cannot be bound; `bound_port` gets the port
// (useful with ":0").
std::unique_ptr<grpc::Server> start_grpc_server(const std::string& listen,
                                                EstimatesService& service, int& bound_port,
                                                std::string& error);

}  // namespace spand
