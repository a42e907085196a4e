// spand.v1 Estimates as the EstimateSource: unary Get (with a deadline) on a miss, and a
// Watch stream on the prefixes the agent cares about, restarted with backoff when it breaks.
// Also the client of Report, for spand_report and TCP_INFO sampling.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "estimate.hpp"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace spand::agent {

class GrpcEstimateSource : public EstimateSource {
 public:
  GrpcEstimateSource(const std::string& target, uint32_t deadline_ms);
  ~GrpcEstimateSource() override;
  FetchResult get(const Prefix& prefix) override;
  void watch(const std::vector<Prefix>& prefixes) override;
  std::vector<Estimate> take_updates() override;
  // One Report stream carrying `items`; false when the service could not take them.
  bool report(const std::vector<ReportItem>& items);
  uint64_t errors() const { return errors_.load(); }

 private:
  void watch_loop();
  std::shared_ptr<grpc::Channel> channel_;
  uint32_t deadline_ms_;
  std::atomic<uint64_t> errors_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Prefix> watch_prefixes_;
  uint64_t watch_generation_ = 0;
  grpc::ClientContext* watch_ctx_ = nullptr;
  std::vector<Estimate> pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spand::agent
