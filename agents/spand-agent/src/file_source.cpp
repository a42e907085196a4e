#include "file_source.hpp"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace spand::agent {

bool FileEstimateSource::load(std::string& error) {
  std::ifstream in(path_);
  if (!in) {
    error = path_ + ": cannot open";
    return false;
  }
  std::map<Prefix, Estimate> fresh;
  try {
    auto j = nlohmann::json::parse(in);
    for (const auto& e : j.at("estimates")) {
      Estimate est;
      auto p = Prefix::parse(e.at("prefix").get<std::string>());
      if (!p) {
        error = path_ + ": bad prefix " + e.at("prefix").dump();
        return false;
      }
      est.prefix = *p;
      est.samples = e.value("samples", uint64_t{0});
      est.wc_segments = e.value("wc_segments", 0.0);
      est.rtt_ms = e.value("rtt_ms", 0.0);
      est.min_rtt_ms = e.value("min_rtt_ms", 0.0);
      est.age_s = e.value("age_s", 0.0);
      std::string v = e.value("verdict", std::string("USE_ESTIMATE"));
      est.verdict = v == "USE_ESTIMATE" ? Verdict::kUseEstimate
                    : v == "SLOW_START" ? Verdict::kSlowStart
                                        : Verdict::kUnspecified;
      fresh[est.prefix] = est;
    }
  } catch (const std::exception& ex) {
    error = path_ + ": " + ex.what();
    return false;
  }
  struct stat st {};
  if (stat(path_.c_str(), &st) == 0) mtime_ = st.st_mtim;
  for (const auto& [p, e] : fresh) pending_.push_back(e);
  // Prefixes that left the file come back as "no estimate" through get().
  estimates_ = std::move(fresh);
  loaded_ = true;
  return true;
}

bool FileEstimateSource::reload_if_changed() {
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) return loaded_;
  if (loaded_ && st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec)
    return true;
  std::string err;
  return load(err);
}

FetchResult FileEstimateSource::get(const Prefix& prefix) {
  if (!reload_if_changed()) return {FetchStatus::kUnavailable, std::nullopt};
  auto it = estimates_.find(prefix);
  if (it == estimates_.end()) return {FetchStatus::kNotFound, std::nullopt};
  return {FetchStatus::kOk, it->second};
}

std::vector<Estimate> FileEstimateSource::take_updates() {
  reload_if_changed();
  std::vector<Estimate> out;
  out.swap(pending_);
  return out;
}

}  // namespace spand::agent
