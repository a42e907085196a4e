// A static estimates file (JSON) as the EstimateSource: for servers without an estimate
// service, for tests, and for pinning known paths. Re-read when its modification time changes.
//   {"estimates": [{"prefix": "198.51.100.0/24", "samples": 50, "wc_segments": 40,
//                   "rtt_ms": 20, "verdict": "USE_ESTIMATE", "age_s": 0}]}
#pragma once

#include <ctime>
#include <map>
#include <string>

#include "estimate.hpp"

namespace spand::agent {

class FileEstimateSource : public EstimateSource {
 public:
  explicit FileEstimateSource(std::string path) : path_(std::move(path)) {}
  // Loads the file now; false with `error` naming the problem.
  bool load(std::string& error);
  FetchResult get(const Prefix& prefix) override;
  void watch(const std::vector<Prefix>&) override {}
  std::vector<Estimate> take_updates() override;

 private:
  bool reload_if_changed();
  std::string path_;
  timespec mtime_{};
  bool loaded_ = false;
  std::map<Prefix, Estimate> estimates_;
  std::vector<Estimate> pending_;
};

}  // namespace spand::agent
