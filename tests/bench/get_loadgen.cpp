// Closed-loop load generator for spand.v1.Estimates/Get (tests/bench/service_bench.sh): N calls
// in flight over K HTTP/2 connections, driven by T threads each with its own completion queue.
// Addresses come round robin from a ghz-style data file (JSON array of GetRequest objects, as
// written by service_bench_populate). Every reply is checked (status OK, the prefix echoes the
// request's /24 or /48, samples >= --min-samples, cwnd_opt present when transfer_bytes was
// asked), so a broken server cannot look fast: only good replies count in the rate and the
// latencies, and any error or bad reply makes the exit status 1. Prints one line: rate of good
// replies, latency percentiles, counts, and this process's CPU time.
// usage: get_loadgen TARGET DATA_JSON [--requests N] [--warmup N] [--concurrency N]
//                    [--connections K] [--threads T] [--min-samples N] [--label TEXT]
//                    [--minimal-stack 1]  (GRPC_ARG_MINIMAL_STACK on the client's channels)
#include <absl/synchronization/mutex.h>
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "spand/v1/estimates.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Target {
  spand::v1::GetRequest req;
  std::string expect_prefix;  // "" = not checked (an address the generator cannot map)
};

// The prefix the server should name for `address` with its default lengths (/24, /48).
std::string expected_prefix(const std::string& address) {
  if (address.find('/') != std::string::npos) return "";
  uint8_t b[16];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, address.c_str(), b) == 1) {
    b[3] = 0;
    if (!inet_ntop(AF_INET, b, text, sizeof text)) return "";
    return std::string(text) + "/24";
  }
  if (inet_pton(AF_INET6, address.c_str(), b) == 1) {
    std::memset(b + 6, 0, 10);
    if (!inet_ntop(AF_INET6, b, text, sizeof text)) return "";
    return std::string(text) + "/48";
  }
  return "";
}

struct Options {
  std::string target;
  std::string data;
  uint64_t requests = 200'000;
  uint64_t warmup = 5'000;
  uint32_t concurrency = 64;
  uint32_t connections = 4;
  uint32_t threads = 1;
  uint64_t min_samples = 1;
  bool minimal_stack = false;
  std::string label = "get_loadgen";
};

struct Shared {
  const Options* opts = nullptr;
  const std::vector<Target>* targets = nullptr;
  std::vector<std::unique_ptr<spand::v1::Estimates::Stub>> stubs;
  std::atomic<uint64_t> issued{0};
  uint64_t total = 0;  // warmup + requests
};

constexpr size_t kCodes = 17;  // grpc::StatusCode OK..UNAUTHENTICATED; others count as UNKNOWN

struct ThreadResult {
  std::vector<uint64_t> lat_ns;  // measured calls only
  Clock::time_point first_start = Clock::time_point::max();
  Clock::time_point last_end = Clock::time_point::min();
  std::array<uint64_t, kCodes> codes{};  // every finished call by status code, warmup included
  std::map<std::string, uint64_t> bad;   // OK status, wrong content
};

// One call slot: a call in flight, reissued when it completes. Its objects are reused from call
// to call (a ClientContext cannot be reset, so it is rebuilt in place).
struct Call {
  uint64_t index = 0;
  size_t stub = 0;
  Clock::time_point start;
  std::optional<grpc::ClientContext> ctx;
  spand::v1::Estimate reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<spand::v1::Estimate>> rpc;
};

bool start_call(Shared& sh, Call& c, grpc::CompletionQueue& cq) {
  const uint64_t i = sh.issued.fetch_add(1, std::memory_order_relaxed);
  if (i >= sh.total) return false;
  c.index = i;
  c.rpc.reset();  // lives in the previous call's arena, which the previous context owns
  c.ctx.emplace();
  c.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  c.reply.Clear();
  const Target& t = (*sh.targets)[i % sh.targets->size()];
  c.start = Clock::now();
  c.rpc = sh.stubs[c.stub]->AsyncGet(&*c.ctx, t.req, &cq);
  c.rpc->Finish(&c.reply, &c.status, &c);
  return true;
}

// True for a reply that answers the request; otherwise counted in r.bad by reason.
bool check(const Shared& sh, const Call& c, ThreadResult& r) {
  const Target& t = (*sh.targets)[c.index % sh.targets->size()];
  const spand::v1::Estimate& e = c.reply;
  if (!t.expect_prefix.empty() && e.prefix() != t.expect_prefix) {
    ++r.bad["prefix mismatch"];
  } else if (e.samples() < sh.opts->min_samples) {
    ++r.bad["too few samples"];
  } else if (t.req.has_transfer_bytes() && !e.has_cwnd_opt()) {
    ++r.bad["no cwnd_opt"];
  } else {
    return true;
  }
  return false;
}

void run_thread(Shared& sh, uint32_t first_slot, uint32_t slots, uint32_t stride, ThreadResult& r) {
  grpc::CompletionQueue cq;
  std::vector<Call> calls(slots);
  r.lat_ns.reserve(sh.opts->requests / sh.opts->threads + 1024);
  uint32_t active = 0;
  for (uint32_t k = 0; k < slots; ++k) {
    calls[k].stub = (first_slot + k * stride) % sh.stubs.size();
    if (start_call(sh, calls[k], cq)) ++active;
  }
  void* tag;
  bool ok;
  while (active > 0 && cq.Next(&tag, &ok)) {
    Call& c = *static_cast<Call*>(tag);
    const Clock::time_point end = Clock::now();
    const size_t code = size_t(c.status.error_code());
    ++r.codes[code < kCodes ? code : size_t(grpc::StatusCode::UNKNOWN)];
    const bool good = c.status.ok() && check(sh, c, r);
    if (c.index >= sh.opts->warmup) {
      // Only good replies count in the rate and the latencies: failures cannot look fast.
      if (good) r.lat_ns.push_back(uint64_t(std::chrono::nanoseconds(end - c.start).count()));
      r.first_start = std::min(r.first_start, c.start);
      r.last_end = std::max(r.last_end, end);
    }
    if (!start_call(sh, c, cq)) --active;
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool load_targets(const std::string& path, std::vector<Target>& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  nlohmann::json j;
  try {
    in >> j;
    for (const auto& o : j) {
      Target t;
      t.req.set_address(o.at("address").get<std::string>());
      if (o.contains("transfer_bytes"))
        t.req.set_transfer_bytes(o["transfer_bytes"].get<uint64_t>());
      if (o.contains("mss")) t.req.set_mss(o["mss"].get<uint32_t>());
      if (o.contains("acked_per_ack")) t.req.set_acked_per_ack(o["acked_per_ack"].get<uint32_t>());
      t.expect_prefix = expected_prefix(t.req.address());
      out.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    error = path + ": " + e.what();
    return false;
  }
  if (out.empty()) error = path + ": no requests";
  return !out.empty();
}

double percentile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return NAN;
  const size_t i = std::min(sorted.size() - 1, size_t(std::ceil(q * double(sorted.size())) - 1));
  return double(sorted[i]) / 1e6;
}

std::string format_map(const std::map<std::string, uint64_t>& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
  return s + "}";
}

int usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s TARGET DATA_JSON [--requests N] [--warmup N] [--concurrency N] "
      "[--connections K] [--threads T] [--min-samples N] [--label TEXT] [--minimal-stack 1]\n",
      argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      pos.push_back(a);
      continue;
    }
    if (i + 1 >= argc) return usage(argv[0]);
    const std::string v = argv[++i];
    if (a == "--requests") {
      o.requests = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--warmup") {
      o.warmup = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--concurrency") {
      o.concurrency = uint32_t(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "--connections") {
      o.connections = uint32_t(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "--threads") {
      o.threads = uint32_t(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "--min-samples") {
      o.min_samples = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--minimal-stack") {
      o.minimal_stack = v == "1";
    } else if (a == "--label") {
      o.label = v;
    } else {
      return usage(argv[0]);
    }
  }
  if (pos.size() != 2 || o.requests == 0 || o.concurrency == 0 || o.connections == 0 ||
      o.threads == 0) {
    return usage(argv[0]);
  }
  // As the server does (service.cpp): Debian's Abseil tracks every mutex in a global lock graph.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  o.target = pos[0];
  o.data = pos[1];
  o.threads = std::min(o.threads, o.concurrency);

  std::vector<Target> targets;
  std::string error;
  if (!load_targets(o.data, targets, error)) {
    std::fprintf(stderr, "get_loadgen: %s\n", error.c_str());
    return 2;
  }
  Shared sh;
  sh.opts = &o;
  sh.targets = &targets;
  sh.total = o.warmup + o.requests;
  for (uint32_t k = 0; k < o.connections; ++k) {
    // A distinct argument per channel, and no shared subchannel pool: one TCP connection each.
    grpc::ChannelArguments args;
    args.SetInt("spand.loadgen.channel", int(k));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // A load generator never retries: a failed call is counted, not hidden.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    if (o.minimal_stack) args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    auto ch = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      std::fprintf(stderr, "get_loadgen: cannot connect to %s\n", o.target.c_str());
      return 2;
    }
    sh.stubs.push_back(spand::v1::Estimates::NewStub(ch));
  }

  const double cpu0 = cpu_seconds();
  const Clock::time_point wall0 = Clock::now();
  std::vector<ThreadResult> results(o.threads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.threads; ++t) {
    // Slots t, t + T, t + 2T ... : every thread spreads its calls over all connections.
    const uint32_t slots = o.concurrency / o.threads + (t < o.concurrency % o.threads ? 1 : 0);
    threads.emplace_back(run_thread, std::ref(sh), t, slots, o.threads, std::ref(results[t]));
  }
  for (auto& th : threads) th.join();
  const double cpu = cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();

  std::vector<uint64_t> lat;
  std::map<std::string, uint64_t> codes, bad;  // codes: by name, as printed
  Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
  for (ThreadResult& r : results) {
    lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
    first = std::min(first, r.first_start);
    last = std::max(last, r.last_end);
    for (size_t k = 0; k < kCodes; ++k) {
      if (r.codes[k]) codes[k == 0 ? "OK" : "code " + std::to_string(k)] += r.codes[k];
    }
    for (const auto& [k, v] : r.bad) bad[k] += v;
  }
  std::sort(lat.begin(), lat.end());
  const double secs = lat.empty() ? 0 : std::chrono::duration<double>(last - first).count();
  const double rps = secs > 0 ? double(lat.size()) / secs : 0;
  uint64_t bad_total = 0, failed = 0;
  for (const auto& [k, v] : bad) bad_total += v;
  for (const auto& [k, v] : codes) failed += k == "OK" ? 0 : v;
  std::printf(
      "%-40s %8.0f Get/s  p50 %6.3f  p90 %6.3f  p99 %6.3f  p99.9 %6.3f  max %7.3f ms  "
      "count %zu  codes %s  bad %s  loadgen cpu %.1f s (%.0f%% of a core, %.1f us per call)\n",
      o.label.c_str(), rps, percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99),
      percentile(lat, 0.999), lat.empty() ? NAN : double(lat.back()) / 1e6, lat.size(),
      format_map(codes).c_str(), format_map(bad).c_str(), cpu, wall > 0 ? 100 * cpu / wall : 0,
      1e6 * cpu / double(sh.total));
  std::fflush(stdout);
  return failed == 0 && bad_total == 0 && lat.size() == o.requests ? 0 : 1;
}
