// spand.v1 Estimates as the EstimateSource: unary Get (with a deadline) on a miss, and a
// Watch stream on the prefixes the agent cares about, restarted with backoff when it breaks.
// Also the client of Report, for spand_report and TCP_INFO sampling.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "estimate.hpp"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace spand::agent {

class GrpcEstimateSource : public EstimateSource {
 public:
  // `channel`: plain or TLS (proto/client_channel.hpp); `report_token`: Report's bearer token,
  // "" for none.
  GrpcEstimateSource(std::shared_ptr<grpc::Channel> channel, uint32_t deadline_ms,
                     std::string report_token);
  ~GrpcEstimateSource() override;
  FetchResult get(const Prefix& prefix) override;
  void watch(const std::vector<Prefix>& prefixes) override;
  std::vector<Estimate> take_updates() override;
  // One Report stream carrying `items`; false when the service could not take them.
  bool report(const std::vector<ReportItem>& items);
  uint64_t errors() const { return errors_.load(); }

 private:
  void watch_loop();
  void log_failure(const char* call, const grpc::Status& st);  // rate-limited, stderr
  std::shared_ptr<grpc::Channel> channel_;
  uint32_t deadline_ms_;
  std::string report_token_;
  std::atomic<uint64_t> errors_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Prefix> watch_prefixes_;
  uint64_t watch_generation_ = 0;
  grpc::ClientContext* watch_ctx_ = nullptr;
  std::vector<Estimate> pending_;
  bool stop_ = false;
  std::thread thread_;
  std::mutex log_mu_;
  bool logged_once_ = false;
  uint64_t failures_unlogged_ = 0;
  std::chrono::steady_clock::time_point last_log_;
};

}  // namespace spand::agent
