// `spandctl losses`: reads flow records (JSON Lines, docs/records.md), keeps each half-flow that
// carried data, and tabulates its loss events by flow size and by the flight at the loss.
#include "spandctl_losses.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "exit_status.hpp"

namespace spand {
namespace {

using nlohmann::json;

// The shared table (common/exit_status.hpp): a line that is not a flow record is bad input,
// 2 like an unreadable file or the gateway's damaged capture file.
constexpr int kExitOk = exit_status::kOk;
constexpr int kExitBadInput = exit_status::kUsage;
constexpr int kExitUsage = exit_status::kUsage;

constexpr std::string_view kUsage =
    "usage: spandctl losses [--direction s2c|c2s|both] [--json] FLOWS.jsonl|-\n"
    "\n"
    "TCP Smart Framing's loss analysis (Mellia, Meo, Casetti, ToN 2005), as Tstat reports it,\n"
    "from spand-gateway --flows-out records. Each direction of a connection that carried data\n"
    "is one flow (Tstat's half-connection); its size is its unique payload in segments of its\n"
    "MSS. Two tables:\n"
    "  by flow size (segments 1-3, 4-10, 11-30, 31-100, 101-1000, 1001+):\n"
    "    flows, flows with a loss event, loss events, fast retransmit / timeout shares,\n"
    "    never4: flows whose flight never reached 4 segments (fast retransmit needs 3\n"
    "    duplicate ACKs behind the lost segment),\n"
    "    the completion-time cost of timeouts: median completion time (ms) of flows without\n"
    "    loss and of flows with a timeout, and wait: the share of the latter's completion\n"
    "    time spent waiting for the retransmission timer;\n"
    "  by the flight at the loss (segments 1, 2, 3, 4-7, 8-15, 16+): loss events and their\n"
    "    fast retransmit / timeout shares.\n"
    "Completion time: the connection's first packet to this direction's last data segment\n"
    "(a SYN's timeout counts in the client's direction). Medians of an even count are the\n"
    "mean of the two middle values; '-' is an empty cell.\n"
    "\n"
    "  --direction D          s2c (servers' data, default), c2s, or both\n"
    "  --json                 one JSON object instead of the tables\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or input: an unreadable file, a line that is not a\n"
    "flow record (file:line and why on stderr).\n"
    "Example: spand-gateway --pcap trace.pcap --flows-out flows.jsonl && spandctl losses "
    "flows.jsonl\n";

constexpr int kSizeClasses = 6;
constexpr std::array<uint64_t, kSizeClasses> kSizeUpper = {3, 10, 30, 100, 1000, UINT64_MAX};
constexpr std::array<const char*, kSizeClasses> kSizeNames = {"1-3",    "4-10",     "11-30",
                                                              "31-100", "101-1000", "1001+"};
constexpr int kFlightClasses = 6;  // gateway/dataplane/flow_record.hpp, loss_flight_class
constexpr std::array<const char*, kFlightClasses> kFlightNames = {"1",   "2",    "3",
                                                                  "4-7", "8-15", "16+"};

struct SizeRow {
  uint64_t flows = 0;
  uint64_t lossy = 0;  // flows with at least one loss event
  uint64_t fast = 0;
  uint64_t timeout = 0;
  uint64_t never4 = 0;
  std::vector<double> ct_clean_ms;    // completion times of flows without a loss event
  std::vector<double> ct_timeout_ms;  // ... of flows with at least one timeout
  double timeout_wait_ms = 0;         // summed over the flows with a timeout
  double timeout_ct_ms = 0;           // their completion times, summed
};

struct FlightRow {
  uint64_t fast = 0;
  uint64_t timeout = 0;
};

struct Tables {
  std::array<SizeRow, kSizeClasses + 1> size;  // the last row: all flows
  std::array<FlightRow, kFlightClasses + 1> flight;
  uint64_t records = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A field that must be a non-negative integer; throws with the field's name otherwise.
uint64_t need_u64(const json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) {
    throw std::runtime_error(std::string("field '") + key +
                             "' missing or not a non-negative integer");
  }
  return it->get<uint64_t>();
}

const json& need_object(const json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_object()) {
    throw std::runtime_error(std::string("field '") + key + "' missing or not an object");
  }
  return *it;
}

std::array<uint64_t, kFlightClasses> need_classes(const json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_array() || it->size() != kFlightClasses) {
    throw std::runtime_error(std::string("field '") + key + "' missing or not an array of " +
                             std::to_string(kFlightClasses) +
                             " counts (flow records of a gateway older than this spandctl?)");
  }
  std::array<uint64_t, kFlightClasses> v{};
  for (int k = 0; k < kFlightClasses; ++k) {
    if (!(*it)[k].is_number_unsigned()) {
      throw std::runtime_error(std::string("field '") + key + "' holds a non-count");
    }
    v[k] = (*it)[k].get<uint64_t>();
  }
  return v;
}

void add_half(Tables& t, const json& h, uint64_t first_ts_ns) {
  const uint64_t unique = need_u64(h, "unique_bytes");
  if (unique == 0) return;  // no data: not a flow in Tstat's sense
  const uint64_t mss = need_u64(h, "mss");
  const uint64_t segments = (unique + (mss ? mss : 1460) - 1) / (mss ? mss : 1460);
  const uint64_t fast = need_u64(h, "loss_events_fast");
  const uint64_t timeout = need_u64(h, "loss_events_timeout");
  const auto by_fast = need_classes(h, "loss_flight_fast");
  const auto by_timeout = need_classes(h, "loss_flight_timeout");
  const uint64_t wait_us = need_u64(h, "timeout_wait_us");
  const uint64_t last_data_ns = need_u64(h, "last_data_ns");
  const double ct_ms = last_data_ns > first_ts_ns ? (last_data_ns - first_ts_ns) / 1e6 : 0.0;
  const bool never4 = need_u64(h, "max_flight_segments") < 4;

  int c = 0;
  while (segments > kSizeUpper[c]) ++c;
  for (int row : {c, kSizeClasses}) {
    SizeRow& r = t.size[row];
    ++r.flows;
    r.lossy += fast + timeout > 0;
    r.fast += fast;
    r.timeout += timeout;
    r.never4 += never4;
    if (fast + timeout == 0) r.ct_clean_ms.push_back(ct_ms);
    if (timeout > 0) {
      r.ct_timeout_ms.push_back(ct_ms);
      r.timeout_wait_ms += wait_us / 1e3;
      r.timeout_ct_ms += ct_ms;
    }
  }
  for (int k = 0; k < kFlightClasses; ++k) {
    for (int row : {k, kFlightClasses}) {
      t.flight[row].fast += by_fast[k];
      t.flight[row].timeout += by_timeout[k];
    }
  }
}

// Percent, or null for an empty denominator.
json share(uint64_t part, uint64_t whole) {
  return whole ? json(100.0 * double(part) / double(whole)) : json(nullptr);
}

std::string cell(const json& v, const char* fmt) {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

json to_json(const Tables& t, const std::string& direction) {
  json out = {{"direction", direction}, {"records", t.records}};
  json sizes = json::array();
  for (int i = 0; i <= kSizeClasses; ++i) {
    const SizeRow& r = t.size[i];
    sizes.push_back({
        {"size_segments", i < kSizeClasses ? kSizeNames[i] : "all"},
        {"flows", r.flows},
        {"flows_with_loss", r.lossy},
        {"loss_events", r.fast + r.timeout},
        {"fast_pct", share(r.fast, r.fast + r.timeout)},
        {"timeout_pct", share(r.timeout, r.fast + r.timeout)},
        {"never4_pct", share(r.never4, r.flows)},
        {"ct_ms_no_loss", r.ct_clean_ms.empty() ? json(nullptr) : json(median(r.ct_clean_ms))},
        {"flows_with_timeout", r.ct_timeout_ms.size()},
        {"ct_ms_timeout", r.ct_timeout_ms.empty() ? json(nullptr) : json(median(r.ct_timeout_ms))},
        {"timeout_wait_pct",
         r.timeout_ct_ms > 0 ? json(100.0 * r.timeout_wait_ms / r.timeout_ct_ms) : json(nullptr)},
    });
  }
  json flights = json::array();
  for (int k = 0; k <= kFlightClasses; ++k) {
    const FlightRow& r = t.flight[k];
    flights.push_back({
        {"flight_segments", k < kFlightClasses ? kFlightNames[k] : "all"},
        {"loss_events", r.fast + r.timeout},
        {"fast", r.fast},
        {"timeout", r.timeout},
        {"fast_pct", share(r.fast, r.fast + r.timeout)},
        {"timeout_pct", share(r.timeout, r.fast + r.timeout)},
    });
  }
  out["by_size"] = sizes;
  out["by_flight"] = flights;
  return out;
}

void print_tables(std::ostream& out, const json& j) {
  char line[256];
  out << "loss events by flow size (" << j["direction"].get<std::string>() << ", "
      << j["records"].get<uint64_t>() << " flow records)\n";
  std::snprintf(line, sizeof line, "%-10s %7s %7s %7s %7s %7s %7s %11s %7s %11s %7s\n", "segments",
                "flows", "lossy", "events", "fast%", "rto%", "never4%", "ct_ms_clean", "rto_n",
                "ct_ms_rto", "wait%");
  out << line;
  for (const json& r : j["by_size"]) {
    std::snprintf(line, sizeof line, "%-10s %7llu %7llu %7llu %7s %7s %7s %11s %7llu %11s %7s\n",
                  r["size_segments"].get<std::string>().c_str(),
                  (unsigned long long)r["flows"].get<uint64_t>(),
                  (unsigned long long)r["flows_with_loss"].get<uint64_t>(),
                  (unsigned long long)r["loss_events"].get<uint64_t>(),
                  cell(r["fast_pct"], "%.1f").c_str(), cell(r["timeout_pct"], "%.1f").c_str(),
                  cell(r["never4_pct"], "%.1f").c_str(), cell(r["ct_ms_no_loss"], "%.1f").c_str(),
                  (unsigned long long)r["flows_with_timeout"].get<uint64_t>(),
                  cell(r["ct_ms_timeout"], "%.1f").c_str(),
                  cell(r["timeout_wait_pct"], "%.1f").c_str());
    out << line;
  }
  out << "\nloss events by flight at the loss\n";
  std::snprintf(line, sizeof line, "%-10s %7s %7s %7s %7s %7s\n", "flight", "events", "fast", "rto",
                "fast%", "rto%");
  out << line;
  for (const json& r : j["by_flight"]) {
    std::snprintf(line, sizeof line, "%-10s %7llu %7llu %7llu %7s %7s\n",
                  r["flight_segments"].get<std::string>().c_str(),
                  (unsigned long long)r["loss_events"].get<uint64_t>(),
                  (unsigned long long)r["fast"].get<uint64_t>(),
                  (unsigned long long)r["timeout"].get<uint64_t>(),
                  cell(r["fast_pct"], "%.1f").c_str(), cell(r["timeout_pct"], "%.1f").c_str());
    out << line;
  }
}

int usage_error(std::ostream& err, const std::string& msg) {
  err << "spandctl losses: " << msg << "\nTry 'spandctl losses --help'.\n";
  return kExitUsage;
}

}  // namespace

int spandctl_losses_run(int argc, char** argv, std::ostream& out, std::ostream& err) {
  std::string direction = "s2c";
  std::string path;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      out << kUsage;
      return kExitOk;
    } else if (a == "--json") {
      as_json = true;
    } else if (a == "--direction") {
      if (i + 1 >= argc) return usage_error(err, "--direction needs s2c, c2s or both");
      direction = argv[++i];
      if (direction != "s2c" && direction != "c2s" && direction != "both") {
        return usage_error(err, "--direction: '" + direction + "' is not s2c, c2s or both");
      }
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usage_error(err, "unknown option '" + a + "'");
    } else if (path.empty()) {
      path = a;
    } else {
      return usage_error(err, "one input file only, got '" + path + "' and '" + a + "'");
    }
  }
  if (path.empty()) return usage_error(err, "no input: give a --flows-out file, or - for stdin");
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) return usage_error(err, "cannot read '" + path + "'");
  }
  std::istream& in = path == "-" ? std::cin : file;

  Tables t;
  std::string line;
  uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    try {
      const json rec = json::parse(line);
      if (!rec.is_object()) throw std::runtime_error("not a JSON object");
      const uint64_t first_ts_ns = need_u64(rec, "first_ts_ns");
      const json& c2s = need_object(rec, "c2s");
      const json& s2c = need_object(rec, "s2c");
      if (direction != "c2s") add_half(t, s2c, first_ts_ns);
      if (direction != "s2c") add_half(t, c2s, first_ts_ns);
      ++t.records;
    } catch (const std::exception& e) {
      err << "spandctl losses: " << path << ":" << line_no << ": not a flow record: " << e.what()
          << "\n";
      return kExitBadInput;
    }
  }
  const json j = to_json(t, direction);
  if (as_json) {
    out << j.dump() << "\n";
  } else {
    print_tables(out, j);
  }
  return kExitOk;
}

int spandctl_losses_main(int argc, char** argv) {
  return spandctl_losses_run(argc, argv, std::cout, std::cerr);
}

}  // namespace spand
