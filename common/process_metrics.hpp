// Metrics every spand daemon exports besides its own: spand_build_info and the process_*
// family of the Prometheus client libraries (prometheus-cpp 1.0 has none), read from /proc/self
// when scraped.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace spand {

class ProcessMetrics final : public prometheus::Collectable {
 public:
  // `program`: "spand-gateway", "spand-estimates", "spand-agent".
  explicit ProcessMetrics(std::string program);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string program_;
};

}  // namespace spand
