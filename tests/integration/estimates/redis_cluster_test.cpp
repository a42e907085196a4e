// RedisStore against a real 3-master Redis Cluster started by the test: slot routing, one
// pipelined round trip per node per flush, MOVED and ASK during a slot migration, node loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "estimates/key_slot.hpp"
#include "estimates/redis_schema.hpp"
#include "estimates/redis_store.hpp"
#include "estimates/sample_writer.hpp"
#include "redis_harness.hpp"
#include "test_data.hpp"

namespace spand::test {
namespace {

using Wall = SampleWriter::Clock;

RedisReply cmd(const RedisServer& s, const RedisArgv& argv) {
  RedisConn c;
  RedisReply r;
  std::string e;
  if (!s.connect(c) || !c.command(argv, r, e)) {
    r.type = RedisReply::Type::kError;
    r.str = "test connection failed: " + e;
  }
  return r;
}

std::string info_field(const std::string& info, const std::string& key) {
  size_t p = info.find(key);
  if (p == std::string::npos) return "";
  size_t end = info.find_first_of(",\r\n", p);
  return info.substr(p + key.size(), end - p - key.size());
}

uint64_t evalsha_calls(const RedisServer& s) {
  RedisReply r = cmd(s, {"INFO", "commandstats"});
  std::string v = info_field(r.str, "cmdstat_evalsha:calls=");
  return v.empty() ? 0 : std::stoull(v);
}

class RedisCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (int i = 0; i < 3; ++i) {
      nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{}, true));
      std::string e;
      ASSERT_TRUE(nodes_.back()->start(e)) << e;
    }
    std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
    for (auto& n : nodes_) argv.push_back("127.0.0.1:" + std::to_string(n->port()));
    argv.insert(argv.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    std::string out;
    ASSERT_EQ(run_program(argv, out), 0) << out;
    ASSERT_TRUE(poll_until(
        [] {
          for (auto& n : nodes_)
            if (cmd(*n, {"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos)
              return false;
          return true;
        },
        20'000))
        << "cluster did not reach cluster_state:ok";
  }
  static void TearDownTestSuite() { nodes_.clear(); }

  RedisStoreOptions opts() const {
    RedisStoreOptions o;
    for (auto& n : nodes_) o.cluster_seeds.push_back(n->endpoint());
    o.cluster_seeds.resize(1);  // one seed is enough: the rest comes from CLUSTER SLOTS
    o.conn.command_timeout_ms = 2000;
    return o;
  }

  // Which test node serves `slot`, by asking the cluster (not our slot map).
  static int owner_of(uint16_t slot) {
    RedisReply r = cmd(*nodes_[0], {"CLUSTER", "SLOTS"});
    for (const RedisReply& range : r.elements) {
      if (slot < range.elements[0].integer || slot > range.elements[1].integer) continue;
      long long port = range.elements[2].elements[1].integer;
      for (size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i]->port() == port) return int(i);
    }
    return -1;
  }

  static std::vector<std::unique_ptr<RedisServer>> nodes_;
};
std::vector<std::unique_ptr<RedisServer>> RedisCluster::nodes_;

// One W_c and one RTT sample for each of `n` prefixes starting at `first`.
std::vector<Sample> one_each(uint32_t first, uint32_t n, uint64_t ts, uint32_t salt) {
  std::vector<Sample> out;
  for (uint32_t p = first; p < first + n; ++p) {
    out.push_back(make_sample(SampleKind::kWc, client_of(p, 1), 1 + (p * 7 + salt) % 90, ts));
    out.push_back(
        make_sample(SampleKind::kRtt, client_of(p, 2), 1000 + (p * 13 + salt) % 5000, ts + 1));
  }
  return out;
}

void check_reads(RedisStore& store, const std::vector<Sample>& all, uint32_t first, uint32_t n,
                 uint64_t now) {
  std::vector<Prefix> ps;
  for (uint32_t p = first; p < first + n; ++p) ps.push_back(prefix24(p));
  std::vector<Accumulator> accs;
  std::vector<uint8_t> ok;
  std::string e;
  ASSERT_TRUE(store.read_windows(ps, now, accs, ok, e)) << e;
  for (size_t i = 0; i < ps.size(); ++i) {
    Expected want = expected_in(all, ps[i], now - 300 * kSec, now);
    EXPECT_EQ(accs[i].wc_count, want.wc_n) << ps[i].to_string();
    EXPECT_EQ(accs[i].wc_sum, want.wc_sum) << ps[i].to_string();
    EXPECT_EQ(accs[i].rtt_count, want.rtt_n) << ps[i].to_string();
    EXPECT_EQ(accs[i].rtt_sum_us, want.rtt_sum) << ps[i].to_string();
    EXPECT_EQ(accs[i].rtt_min_us, want.rtt_min) << ps[i].to_string();
    EXPECT_EQ(accs[i].newest_ts_ns, want.newest) << ps[i].to_string();
  }
}

TEST_F(RedisCluster, KeySlotAgreesWithServer) {
  std::vector<std::string> keys = {
      "123456789",     "somekey",       "foo{hash_tag}", "{user1000}.following",  "foo{}{bar}",
      "foo{{bar}}zap", "foo{bar}{zap}", kClockKey,       activity_key(1700000000)};
  for (uint32_t p = 0; p < 300; ++p) keys.push_back(window_key(prefix24(p * 97)));
  keys.push_back(window_key(prefix_with_len(IpAddr{}, 48)));
  for (const std::string& k : keys) {
    RedisReply r = cmd(*nodes_[0], {"CLUSTER", "KEYSLOT", k});
    ASSERT_EQ(r.type, RedisReply::Type::kInteger) << r.str;
    EXPECT_EQ(key_slot(k), r.integer) << k;
  }
}

TEST_F(RedisCluster, WritesSpreadOneRoundTripPerNodePerFlushReadsCorrect) {
  RedisStore store(opts());
  const uint64_t t = 1'700'000'000 * kSec;
  const uint32_t n = 400;
  std::vector<Sample> all = one_each(0, n, t, 1);
  std::string e;
  SampleWriterOptions wo;
  wo.background = false;
  SampleWriter w(store, wo);
  Wall::time_point wall{};
  w.tick(0, wall);
  // Warm-up flush (other prefixes): connections, script loading and the slot map happen once,
  // not per flush. It also leaves activity for the measured flush to carry.
  for (const Sample& s : one_each(10'000, 50, t, 1)) w.add(s);
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  ASSERT_EQ(w.stats().updates_written_total, 50u);
  for (const Sample& s : all) w.add(s);

  auto before = store.stats().nodes;
  std::vector<uint64_t> evalsha_before;
  for (auto& node : nodes_) evalsha_before.push_back(evalsha_calls(*node));
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  ASSERT_EQ(w.stats().backlog_updates, 0u);
  auto after = store.stats().nodes;
  ASSERT_EQ(after.size(), 3u);

  uint64_t total_cmds = 0;
  std::map<std::string, uint64_t> rt_delta, cmd_delta;
  for (const auto& a : after) {
    uint64_t rt0 = 0, c0 = 0;
    for (const auto& b : before)
      if (b.node == a.node) rt0 = b.round_trips, c0 = b.commands;
    rt_delta[a.node] = a.round_trips - rt0;
    cmd_delta[a.node] = a.commands - c0;
    total_cmds += a.commands - c0;
  }
  for (auto& node : nodes_) {
    std::string name = node->endpoint().to_string();
    EXPECT_EQ(rt_delta[name], 1u) << name << ": one pipelined round trip per node per flush";
    EXPECT_GT(cmd_delta[name], 50u) << name << ": writes spread over all masters";
  }
  // 400 bucket updates plus one activity+clock script carrying the warm-up's 50 prefixes.
  EXPECT_EQ(total_cmds, n + 1);
  // The servers saw exactly the EVALSHAs we counted.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::string name = nodes_[i]->endpoint().to_string();
    EXPECT_EQ(evalsha_calls(*nodes_[i]) - evalsha_before[i], cmd_delta[name]) << name;
  }
  check_reads(store, all, 0, n, t + 10 * kSec);

  // Next flush carries the activity index; top_prefixes reads it from one node.
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  std::vector<PrefixActivity> top;
  ASSERT_TRUE(store.top_prefixes(t + 10 * kSec, 3, top, e)) << e;
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].samples, 2u);  // one W_c and one RTT sample per prefix
}

// The client id key check on a cluster: the fingerprint lives on the {g} slot's node, and a
// writer with another key writes to no node (its prefixes span all three).
TEST_F(RedisCluster, WriterWithAnotherClientKeyWritesToNoNode) {
  RedisStore a(opts()), b(opts());
  const std::string fp_a = client_key_fingerprint_hex(SipKey{5, 6}),
                    fp_b = client_key_fingerprint_hex(SipKey{7, 8});
  a.expect_client_key(fp_a);
  b.expect_client_key(fp_b);
  const uint64_t t = 1'700'000'000 * kSec;
  auto updates = [&](uint32_t first) {
    std::vector<PendingUpdate> out;
    std::set<int> owners;
    for (uint32_t p = first; p < first + 30; ++p) {
      BucketUpdate u;
      u.prefix = prefix24(p);
      u.bucket_start_s = t / kSec;
      u.acc.add(make_sample(SampleKind::kWc, client_of(p, 1), 10, t));
      out.push_back({u, 0});
      owners.insert(owner_of(key_slot(window_key(u.prefix))));
    }
    EXPECT_EQ(owners.size(), 3u);  // 30 prefixes: every node holds some
    return out;
  };
  auto ua = updates(20'000), ub = updates(20'100);
  std::vector<uint8_t> applied;
  std::string e;
  ASSERT_TRUE(a.write_updates(ua, 0, applied, e)) << e;
  const int g = owner_of(key_slot(client_key_fp_key()));
  ASSERT_GE(g, 0);
  EXPECT_EQ(cmd(*nodes_[size_t(g)], {"GET", client_key_fp_key()}).str, fp_a);
  EXPECT_FALSE(b.write_updates(ub, 0, applied, e));
  EXPECT_NE(e.find("client id key mismatch"), std::string::npos) << e;
  EXPECT_EQ(std::count(applied.begin(), applied.end(), 1), 0);
  for (const PendingUpdate& u : ub) {
    const std::string key = window_key(u.update.prefix);
    EXPECT_EQ(cmd(*nodes_[size_t(owner_of(key_slot(key)))], {"EXISTS", key}).integer, 0) << key;
  }
  cmd(*nodes_[size_t(g)], {"DEL", client_key_fp_key()});  // the other tests write without a key
}

TEST_F(RedisCluster, MovedAndAskDuringSlotMigration) {
  RedisStore store(opts());
  const uint64_t t = 1'710'000'000 * kSec;
  const uint32_t p = 5000;
  const uint16_t slot = key_slot(window_key(prefix24(p)));
  int src = owner_of(slot);
  ASSERT_GE(src, 0);
  int dst = (src + 1) % 3;
  std::string src_id = cmd(*nodes_[size_t(src)], {"CLUSTER", "MYID"}).str;
  std::string dst_id = cmd(*nodes_[size_t(dst)], {"CLUSTER", "MYID"}).str;

  std::vector<Sample> all;
  auto write_bucket = [&](uint64_t ts, uint32_t value) {
    BucketUpdate u;
    u.prefix = prefix24(p);
    u.bucket_start_s = bucket_start_of(ts, 10);
    Sample s = make_sample(SampleKind::kWc, client_of(p, 1), value, ts);
    all.push_back(s);
    u.acc.add(s);
    std::string e;
    EXPECT_TRUE(store.write({u}, e)) << e;
  };
  write_bucket(t, 10);  // key in the source node, map learned

  // Start migrating the slot and move the prefix's key (its whole window) to the target: the
  // source now answers ASK for it.
  ASSERT_EQ(
      cmd(*nodes_[size_t(dst)], {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", src_id})
          .str,
      "OK");
  ASSERT_EQ(
      cmd(*nodes_[size_t(src)], {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", dst_id})
          .str,
      "OK");
  ASSERT_EQ(cmd(*nodes_[size_t(src)],
                {"MIGRATE", "127.0.0.1", std::to_string(nodes_[size_t(dst)]->port()),
                 window_key(prefix24(p)), "0", "5000"})
                .str,
            "OK");
  uint64_t redirects0 = store.stats().redirects;
  write_bucket(t + 20 * kSec, 20);  // source answers ASK, written on the target
  EXPECT_EQ(store.stats().redirects, redirects0 + 1);
  {
    // The new bucket is on the target, visible there only to an ASKING client.
    RedisConn c;
    ASSERT_TRUE(nodes_[size_t(dst)]->connect(c));
    RedisReply r;
    std::string e;
    c.append({"ASKING"});
    c.append(
        {"HEXISTS", window_key(prefix24(p)), bucket_field(bucket_start_of(t + 20 * kSec, 10))});
    ASSERT_TRUE(c.read(r, e) && c.read(r, e)) << e;
    EXPECT_EQ(r.integer, 1);
  }

  // Move any remaining keys, then hand the slot over.
  RedisReply keys =
      cmd(*nodes_[size_t(src)], {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
  if (!keys.elements.empty()) {
    RedisArgv migrate = {"MIGRATE", "127.0.0.1", std::to_string(nodes_[size_t(dst)]->port()),
                         "",        "0",         "5000",
                         "KEYS"};
    for (const RedisReply& k : keys.elements) migrate.push_back(k.str);
    ASSERT_EQ(cmd(*nodes_[size_t(src)], migrate).str, "OK");
  }
  for (auto& n : nodes_) cmd(*n, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", dst_id});
  ASSERT_EQ(owner_of(slot), dst);

  // Our slot map still says "source": the write gets MOVED, follows it, and updates the map.
  write_bucket(t + 30 * kSec, 30);
  EXPECT_EQ(store.stats().redirects, redirects0 + 2);
  write_bucket(t + 40 * kSec, 40);  // map already fixed: no redirect
  EXPECT_EQ(store.stats().redirects, redirects0 + 2);
  check_reads(store, all, p, 1, t + 50 * kSec);
  Accumulator acc;
  std::string e;
  ASSERT_TRUE(store.read_window(prefix24(p), t + 50 * kSec, acc, e)) << e;
  EXPECT_EQ(acc.wc_count, 4u);
  EXPECT_EQ(acc.wc_sum, 100.0);

  // Give the slot back so the other tests see the original layout.
  RedisReply back =
      cmd(*nodes_[size_t(dst)], {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
  cmd(*nodes_[size_t(src)], {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", dst_id});
  cmd(*nodes_[size_t(dst)], {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", src_id});
  RedisArgv mig2 = {"MIGRATE", "127.0.0.1", std::to_string(nodes_[size_t(src)]->port()), "", "0",
                    "5000",    "KEYS"};
  for (const RedisReply& k : back.elements) mig2.push_back(k.str);
  if (!back.elements.empty()) cmd(*nodes_[size_t(dst)], mig2);
  for (auto& n : nodes_) cmd(*n, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", src_id});
}

TEST_F(RedisCluster, NodeLossKeepsItsUpdatesInBacklogUntilItReturns) {
  RedisStore store(opts());
  SampleWriterOptions wo;
  wo.background = false;
  SampleWriter w(store, wo);
  Wall::time_point wall{};
  w.tick(0, wall);
  const uint64_t t = 1'720'000'000 * kSec;
  const uint32_t first = 20000, n = 300;
  std::string e;
  // Connect to every node and learn the map before the loss.
  for (const Sample& s : one_each(30'000, 50, t, 3)) w.add(s);
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  ASSERT_EQ(w.stats().updates_written_total, 50u);

  const int victim = 2;
  uint32_t on_victim = 0;
  for (uint32_t p = first; p < first + n; ++p)
    on_victim += owner_of(key_slot(window_key(prefix24(p)))) == victim;
  ASSERT_GT(on_victim, 0u);

  nodes_[victim]->kill9();
  std::vector<Sample> all = one_each(first, n, t, 3);
  for (const Sample& s : all) w.add(s);
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  WriterStats s1 = w.stats();
  EXPECT_EQ(s1.flush_errors_total, 1u);
  EXPECT_EQ(s1.backlog_updates, on_victim);
  EXPECT_EQ(s1.updates_written_total, 50 + n - on_victim);

  // A second flush while it is still down: the same updates wait, nothing is lost or doubled.
  wall += std::chrono::seconds(1);
  w.tick(t, wall);
  EXPECT_EQ(w.stats().backlog_updates, on_victim);

  ASSERT_TRUE(nodes_[victim]->start(e)) << e;  // same port, same nodes.conf
  ASSERT_TRUE(poll_until(
      [&] {
        wall += std::chrono::seconds(1);
        w.tick(t, wall);
        return w.stats().backlog_updates == 0;
      },
      30'000))
      << "backlog did not drain after the node came back";
  EXPECT_EQ(w.stats().updates_written_total, 50 + n);
  EXPECT_GE(w.stats().redis_reconnects_total, 1u);
  check_reads(store, all, first, n, t + 10 * kSec);
}

}  // namespace
}  // namespace spand::test
