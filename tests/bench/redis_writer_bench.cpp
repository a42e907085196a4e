// Writer benchmark (not a test): one flush of 100k active prefixes into a single redis-server
// and into a 3-master Redis Cluster, both started here on loopback. Prints Redis round trips
// and commands per node per flush, flush time, SampleWriter::add cost, and redis-benchmark
// SET/GET on the same servers as the reference.
//   redis_writer_bench [prefixes=100000]
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "estimates/redis_schema.hpp"
#include "estimates/redis_store.hpp"
#include "estimates/sample_writer.hpp"
#include "machine.hpp"
#include "redis_harness.hpp"
#include "test_data.hpp"

using namespace spand;
using namespace spand::test;

namespace {

using Steady = std::chrono::steady_clock;

std::string sh(const std::vector<std::string>& argv) {
  std::string out;
  run_program(argv, out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// One W_c and one RTT sample for each prefix, all in the bucket of `ts`.
void fill(SampleWriter& w, uint32_t first, uint32_t n, uint64_t ts) {
  for (uint32_t p = first; p < first + n; ++p) {
    w.add(make_sample(SampleKind::kWc, client_of(p, 1), 1 + p % 90, ts));
    w.add(make_sample(SampleKind::kRtt, client_of(p, 2), 1000 + p % 5000, ts + 1));
  }
}

IpAddr client_wide(uint32_t i, uint32_t host) {
  // 100k distinct /24s: 10.x.y.0/24 gives 65536, so continue in 11.x.y.0/24.
  return v4(((10u + (i >> 16)) << 24) | ((i & 0xffff) << 8) | (host & 0xff));
}

void fill_wide(SampleWriter& w, uint32_t n, uint64_t ts) {
  for (uint32_t p = 0; p < n; ++p) {
    w.add(make_sample(SampleKind::kWc, client_wide(p, 1), 1 + p % 90, ts));
    w.add(make_sample(SampleKind::kRtt, client_wide(p, 2), 1000 + p % 5000, ts + 1));
  }
}

struct FlushReport {
  double ms = 0;
  uint64_t updates = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_node;  // round trips, commands
};

FlushReport measured_flush(RedisStore& store, SampleWriter& w, Steady::time_point& wall,
                           uint64_t capture_ns) {
  auto before = store.stats().nodes;
  uint64_t written0 = w.stats().updates_written_total;
  wall += std::chrono::seconds(1);
  auto t0 = Steady::now();
  w.tick(capture_ns, wall);
  FlushReport r;
  r.ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  r.updates = w.stats().updates_written_total - written0;
  for (const auto& a : store.stats().nodes) {
    uint64_t rt0 = 0, c0 = 0;
    for (const auto& b : before)
      if (b.node == a.node) rt0 = b.round_trips, c0 = b.commands;
    r.per_node[a.node] = {a.round_trips - rt0, a.commands - c0};
  }
  if (w.stats().backlog_updates != 0)
    std::printf("  WARNING: %llu updates left in backlog\n",
                static_cast<unsigned long long>(w.stats().backlog_updates));
  return r;
}

void print(const char* what, const FlushReport& r) {
  uint64_t cmds = 0;
  for (auto& [n, v] : r.per_node) cmds += v.second;
  std::printf("  %-34s %8.1f ms  %7llu updates  %7llu commands  (%.0f updates/s)\n", what, r.ms,
              static_cast<unsigned long long>(r.updates), static_cast<unsigned long long>(cmds),
              r.ms > 0 ? double(r.updates) / (r.ms / 1000.0) : 0.0);
  for (auto& [n, v] : r.per_node)
    std::printf("      node %-21s round trips %llu  commands %llu\n", n.c_str(),
                static_cast<unsigned long long>(v.first),
                static_cast<unsigned long long>(v.second));
}

void run(const char* title, RedisStoreOptions opts, uint32_t prefixes,
         const std::vector<RedisServer*>& servers, bool cluster) {
  std::printf("\n== %s ==\n", title);
  RedisStore store(opts);
  SampleWriterOptions wo;
  wo.background = false;
  wo.backlog_max_updates = 10'000'000;
  SampleWriter w(store, wo);
  Steady::time_point wall{};
  w.tick(0, wall);
  const uint64_t t = 1'700'000'000 * kSec;

  // Warm-up: connect every node, load scripts, learn the slot map.
  fill(w, 200'000, 300, t - 20 * kSec);
  wall += std::chrono::seconds(1);
  w.tick(t, wall);

  auto a0 = Steady::now();
  fill_wide(w, prefixes, t);
  double add_ms = std::chrono::duration<double, std::milli>(Steady::now() - a0).count();
  std::printf("  SampleWriter::add: %u samples in %.1f ms (%.0f ns/sample, control thread)\n",
              2 * prefixes, add_ms, add_ms * 1e6 / (2.0 * prefixes));
  print("flush 1 (100k prefixes)", measured_flush(store, w, wall, t));
  // Next bucket: the steady state, which also carries flush 1's activity index.
  fill_wide(w, prefixes, t + 10 * kSec);
  print("flush 2 (100k prefixes + activity)", measured_flush(store, w, wall, t + 10 * kSec));

  // One window read for reference (one round trip).
  Accumulator acc;
  std::string e;
  auto r0 = Steady::now();
  const int reads = 2000;
  for (int i = 0; i < reads; ++i)
    store.read_window(prefix_with_len(client_wide(uint32_t(i) * 37 % prefixes, 0), 24),
                      t + 15 * kSec, acc, e);
  double read_us = std::chrono::duration<double, std::micro>(Steady::now() - r0).count() / reads;
  std::printf("  read_window (one HMGET of 30 bucket fields, sequential): %.1f us per prefix\n",
              read_us);

  for (RedisServer* s : servers) {
    RedisConn c;
    s->connect(c);
    RedisReply r;
    c.command({"INFO", "memory"}, r, e);
    size_t p = r.str.find("used_memory_human:");
    std::string mem =
        p == std::string::npos ? "?" : r.str.substr(p + 18, r.str.find('\r', p) - p - 18);
    c.command({"DBSIZE"}, r, e);
    std::printf("  node %s: %lld keys, used_memory %s\n", s->endpoint().to_string().c_str(),
                r.integer, mem.c_str());
  }
  std::printf("  reference: redis-benchmark -t set,get -n 100000 -q on %s\n",
              servers[0]->endpoint().to_string().c_str());
  std::vector<std::string> bench = {
      "redis-benchmark", "-p", std::to_string(servers[0]->port()), "-t", "set,get", "-n",
      "100000",          "-q"};
  if (cluster) bench.push_back("--cluster");  // follows the slot map, like the store
  std::string out = sh(bench);
  // redis-benchmark -q redraws its progress line with '\r': keep the final lines only.
  std::string clean;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\r') {
      size_t nl = clean.rfind('\n');
      clean.erase(nl == std::string::npos ? 0 : nl + 1);
    } else {
      clean += out[i];
    }
  }
  std::printf("%s\n", clean.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t prefixes = argc > 1 ? uint32_t(std::strtoul(argv[1], nullptr, 10)) : 100'000;
  utsname u{};
  uname(&u);
  std::printf("redis_writer_bench: %u active prefixes per flush, one W_c + one RTT sample each\n",
              prefixes);
  std::printf("machine: nproc %ld, CPU %s, kernel %s, %s\n", sysconf(_SC_NPROCESSORS_ONLN),
              spand::bench::cpu_model().c_str(), u.release,
              sh({"redis-server", "--version"}).c_str());
  std::printf("date: %s\n", sh({"date", "-u", "+%Y-%m-%dT%H:%M:%SZ"}).c_str());

  {
    RedisServer single;
    std::string e;
    if (!single.start(e)) {
      std::fprintf(stderr, "%s\n", e.c_str());
      return 1;
    }
    RedisStoreOptions o;
    o.endpoint = single.endpoint();
    o.conn.command_timeout_ms = 10'000;
    run("single redis-server", o, prefixes, {&single}, false);
  }
  {
    std::vector<std::unique_ptr<RedisServer>> nodes;
    std::vector<RedisServer*> raw;
    std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(std::make_unique<RedisServer>(std::vector<std::string>{}, true));
      std::string e;
      if (!nodes.back()->start(e)) {
        std::fprintf(stderr, "%s\n", e.c_str());
        return 1;
      }
      raw.push_back(nodes.back().get());
      create.push_back(nodes.back()->endpoint().to_string());
    }
    create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    std::string out;
    if (run_program(create, out) != 0) {
      std::fprintf(stderr, "cluster create failed: %s\n", out.c_str());
      return 1;
    }
    poll_until(
        [&] {
          for (RedisServer* s : raw) {
            RedisConn c;
            RedisReply r;
            std::string e;
            if (!s->connect(c) || !c.command({"CLUSTER", "INFO"}, r, e) ||
                r.str.find("cluster_state:ok") == std::string::npos)
              return false;
          }
          return true;
        },
        20'000);
    RedisStoreOptions o;
    o.cluster_seeds = {raw[0]->endpoint()};
    o.conn.command_timeout_ms = 10'000;
    run("3-master Redis Cluster", o, prefixes, raw, true);
  }
  return 0;
}
