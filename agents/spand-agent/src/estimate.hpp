// Estimates as the agent sees them, and where they come from (EstimateSource). The gRPC
// client of spand.v1 and the static estimates file both implement EstimateSource, so the
// daemon core is tested with a fake.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prefix.hpp"

namespace spand::agent {

enum class Verdict { kUnspecified, kUseEstimate, kSlowStart };

struct Estimate {
  Prefix prefix;
  uint64_t samples = 0;
  double wc_segments = 0;
  double rtt_ms = 0;
  double min_rtt_ms = 0;
  double age_s = 0;  // at the time it was received
  Verdict verdict = Verdict::kUnspecified;
};

// One sample for spand.v1 Report (from spand_report or TCP_INFO sampling).
struct ReportItem {
  std::string client_address;
  uint32_t wc_segments = 0;  // 0 = absent
  uint32_t rtt_us = 0;       // 0 = absent
  // ReportSample.source: which of the agent's producers took the sample.
  const char* source = "spand-agent/spand_report";
};

enum class FetchStatus {
  kOk,
  kNotFound,     // the source has nothing for this prefix
  kUnavailable,  // the source could not be asked (service down, file unreadable)
};

struct FetchResult {
  FetchStatus status = FetchStatus::kNotFound;
  std::optional<Estimate> estimate;
};

class EstimateSource {
 public:
  virtual ~EstimateSource() = default;
  // One estimate, blocking at most the source's deadline.
  virtual FetchResult get(const Prefix& prefix) = 0;
  // The prefixes the agent cares about now; a streaming source subscribes to them.
  virtual void watch(const std::vector<Prefix>& prefixes) = 0;
  // Estimates pushed since the last call (Watch events); empty for polling sources.
  virtual std::vector<Estimate> take_updates() = 0;
};

}  // namespace spand::agent
