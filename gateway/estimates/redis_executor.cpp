#include "estimates/redis_executor.hpp"

#include <algorithm>
#include <array>
#include <deque>

#include "estimates/key_slot.hpp"
#include "estimates/reconnect_backoff.hpp"

namespace spand {

namespace {

using SteadyClock = std::chrono::steady_clock;

// A batch follows at most this many rounds of redirections (MOVED, ASK, TRYAGAIN, NOSCRIPT).
constexpr int kMaxRounds = 5;

// One Redis server and the connection to it, with its own reconnect backoff.
struct Node {
  RedisEndpoint ep;
  RedisConn conn;
  bool ever_connected = false;
  ReconnectBackoff backoff;
};

class NodeConnector {
 public:
  explicit NodeConnector(const RedisConnOptions& opts) : opts_(opts) {}

  void preload(const RedisScript* s) {
    if (std::find(scripts_.begin(), scripts_.end(), s) == scripts_.end()) scripts_.push_back(s);
  }

  // Connects when needed, honouring the node's backoff; loads the preloaded scripts.
  bool ensure(Node& n, std::string& error) {
    if (n.conn.connected()) return true;
    auto now = SteadyClock::now();
    if (!n.backoff.may_try(now)) {
      error = "redis " + n.ep.to_string() + ": down, next reconnect in " +
              std::to_string(n.backoff.wait_ms(now)) + " ms";
      return false;
    }
    if (!n.conn.connect(n.ep, opts_, error) || !load_scripts(n, error)) {
      mark_failed(n);
      return false;
    }
    if (n.ever_connected) ++reconnects_;
    n.ever_connected = true;
    n.backoff.succeeded();
    return true;
  }

  bool load_scripts(Node& n, std::string& error) {
    if (scripts_.empty()) return true;
    for (const RedisScript* s : scripts_) n.conn.append({"SCRIPT", "LOAD", s->source});
    for (size_t i = 0; i < scripts_.size(); ++i) {
      RedisReply r;
      if (!n.conn.read(r, error)) return false;
      if (r.is_error()) {
        error = "redis " + n.ep.to_string() + ": SCRIPT LOAD: " + r.str;
        // Remaining replies must still be read to keep the connection in sync.
        for (size_t j = i + 1; j < scripts_.size(); ++j)
          if (!n.conn.read(r, error)) return false;
        n.conn.close();
        return false;
      }
    }
    return true;
  }

  void mark_failed(Node& n) {
    n.conn.close();
    n.backoff.failed(SteadyClock::now());
  }

  uint64_t reconnects() const { return reconnects_; }
  const RedisConnOptions& options() const { return opts_; }

 private:
  RedisConnOptions opts_;
  std::vector<const RedisScript*> scripts_;
  uint64_t reconnects_ = 0;
};

struct Outgoing {
  size_t idx;
  bool asking;
};

// Sends `batch` as one pipeline and reads the replies into replies[0..]. False on a transport
// error; then `replies` holds the replies read before it.
bool run_pipeline(RedisConn& c, const std::vector<RedisCommand>& cmds,
                  const std::vector<Outgoing>& batch, std::vector<RedisReply>& replies,
                  std::string& error) {
  replies.clear();
  for (const Outgoing& o : batch) {
    if (o.asking) c.append({"ASKING"});
    c.append(cmds[o.idx].argv);
  }
  for (const Outgoing& o : batch) {
    RedisReply r;
    if (o.asking && !c.read(r, error)) return false;
    if (!c.read(r, error)) return false;
    replies.push_back(std::move(r));
  }
  return true;
}

RedisNodeStats stats_of(const Node& n) {
  return RedisNodeStats{n.ep.to_string(), n.conn.round_trips(), n.conn.commands_sent(),
                        n.conn.connected()};
}

class SingleNodeExecutor final : public RedisExecutor {
 public:
  SingleNodeExecutor(const RedisEndpoint& ep, const RedisConnOptions& opts) : connector_(opts) {
    node_.ep = ep;
  }

  void preload(const RedisScript* s) override { connector_.preload(s); }

  void execute(const std::vector<RedisCommand>& cmds, std::vector<RedisResult>& results) override {
    results.assign(cmds.size(), RedisResult{});
    std::vector<Outgoing> batch;
    for (size_t i = 0; i < cmds.size(); ++i) batch.push_back({i, false});
    for (int round = 0; round < kMaxRounds && !batch.empty(); ++round) {
      std::string error;
      if (!connector_.ensure(node_, error)) {
        for (const Outgoing& o : batch) results[o.idx].error = error;
        return;
      }
      std::vector<RedisReply> replies;
      bool ok = run_pipeline(node_.conn, cmds, batch, replies, error);
      std::vector<Outgoing> retry;
      bool reload = false;
      for (size_t k = 0; k < replies.size(); ++k) {
        size_t idx = batch[k].idx;
        if (replies[k].error_is("NOSCRIPT") && cmds[idx].script) {
          reload = true;
          retry.push_back({idx, false});
          continue;
        }
        results[idx].delivered = true;
        results[idx].reply = std::move(replies[k]);
      }
      if (!ok) {
        connector_.mark_failed(node_);
        for (size_t k = replies.size(); k < batch.size(); ++k) results[batch[k].idx].error = error;
        for (const Outgoing& o : retry) results[o.idx].error = error;
        return;
      }
      if (reload && !connector_.load_scripts(node_, error)) {
        connector_.mark_failed(node_);
        for (const Outgoing& o : retry) results[o.idx].error = error;
        return;
      }
      batch = std::move(retry);
    }
    for (const Outgoing& o : batch) results[o.idx].error = "NOSCRIPT persists after SCRIPT LOAD";
  }

  std::vector<RedisNodeStats> node_stats() const override { return {stats_of(node_)}; }
  uint64_t reconnects() const override { return connector_.reconnects(); }

 private:
  NodeConnector connector_;
  Node node_;
};

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"
bool parse_redirect(const std::string& msg, uint16_t& slot, RedisEndpoint& ep) {
  size_t sp1 = msg.find(' ');
  if (sp1 == std::string::npos) return false;
  size_t sp2 = msg.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) return false;
  unsigned long s = std::strtoul(msg.c_str() + sp1 + 1, nullptr, 10);
  if (s >= kClusterSlots) return false;
  slot = uint16_t(s);
  std::string err;
  return parse_endpoint(std::string_view(msg).substr(sp2 + 1), ep, err);
}

class ClusterExecutor final : public RedisExecutor {
 public:
  ClusterExecutor(const std::vector<RedisEndpoint>& seeds, const RedisConnOptions& opts)
      : connector_(opts), seeds_(seeds) {
    slots_.fill(-1);
  }

  void preload(const RedisScript* s) override { connector_.preload(s); }

  void execute(const std::vector<RedisCommand>& cmds, std::vector<RedisResult>& results) override {
    results.assign(cmds.size(), RedisResult{});
    if (!have_map_) refresh_slots();
    std::vector<uint16_t> slot_of(cmds.size());
    std::vector<int> ask_node(cmds.size(), -1);
    std::vector<size_t> pending;
    for (size_t i = 0; i < cmds.size(); ++i) {
      slot_of[i] = key_slot(cmds[i].route_key);
      pending.push_back(i);
    }
    // Nodes that failed during this batch are not tried again until the next batch.
    std::vector<uint8_t> failed_now;
    for (int round = 0; round < kMaxRounds && !pending.empty(); ++round) {
      failed_now.resize(nodes_.size(), 0);
      std::vector<std::vector<Outgoing>> by_node(nodes_.size());
      std::vector<size_t> retry;
      bool need_refresh = false;
      for (size_t idx : pending) {
        int n = ask_node[idx] >= 0 ? ask_node[idx] : slots_[slot_of[idx]];
        if (n < 0) {
          results[idx].error = "no reachable master serves slot " + std::to_string(slot_of[idx]);
          if (round == 0) {
            need_refresh = true;
            retry.push_back(idx);
          }
          continue;
        }
        if (failed_now[size_t(n)]) {
          results[idx].error =
              "redis " + nodes_[size_t(n)].ep.to_string() + ": failed in this batch";
          continue;
        }
        by_node[size_t(n)].push_back({idx, ask_node[idx] >= 0});
      }
      // Send every node's pipeline first, then read: the nodes work in parallel.
      std::vector<uint8_t> sent(nodes_.size(), 0);
      for (size_t n = 0; n < by_node.size(); ++n) {
        if (by_node[n].empty()) continue;
        std::string error;
        if (!connector_.ensure(nodes_[n], error)) {
          failed_now[n] = 1;
          need_refresh = true;
          for (const Outgoing& o : by_node[n]) results[o.idx].error = error;
          continue;
        }
        for (const Outgoing& o : by_node[n]) {
          if (o.asking) nodes_[n].conn.append({"ASKING"});
          nodes_[n].conn.append(cmds[o.idx].argv);
        }
        sent[n] = 1;
      }
      std::vector<size_t> reload_nodes;
      for (size_t n = 0; n < by_node.size(); ++n) {
        if (!sent[n]) continue;
        bool reload = false;
        for (size_t k = 0; k < by_node[n].size(); ++k) {
          const Outgoing& o = by_node[n][k];
          RedisReply r;
          std::string error;
          if ((o.asking && !nodes_[n].conn.read(r, error)) || !nodes_[n].conn.read(r, error)) {
            connector_.mark_failed(nodes_[n]);
            failed_now[n] = 1;
            need_refresh = true;
            for (size_t j = k; j < by_node[n].size(); ++j) results[by_node[n][j].idx].error = error;
            break;
          }
          size_t idx = o.idx;
          ask_node[idx] = -1;
          uint16_t rslot = 0;
          RedisEndpoint rep;
          if (r.error_is("MOVED") && parse_redirect(r.str, rslot, rep)) {
            ++redirects_;
            slots_[rslot] = int(node_index(rep));
            need_refresh = true;
            results[idx].error = r.str;
            retry.push_back(idx);
          } else if (r.error_is("ASK") && parse_redirect(r.str, rslot, rep)) {
            ++redirects_;
            ask_node[idx] = int(node_index(rep));
            results[idx].error = r.str;
            retry.push_back(idx);
          } else if (r.error_is("TRYAGAIN")) {
            results[idx].error = r.str;  // multi-key command during resharding
            retry.push_back(idx);
          } else if (r.error_is("NOSCRIPT") && cmds[idx].script) {
            reload = true;
            results[idx].error = r.str;
            retry.push_back(idx);
          } else {
            results[idx].delivered = true;
            results[idx].reply = std::move(r);
          }
        }
        if (reload && !failed_now[n]) reload_nodes.push_back(n);
      }
      for (size_t n : reload_nodes) {
        std::string error;
        if (!connector_.load_scripts(nodes_[n], error)) {
          connector_.mark_failed(nodes_[n]);
          failed_now[n] = 1;
        }
      }
      if (need_refresh) refresh_slots();
      pending = std::move(retry);
    }
  }

  std::vector<RedisNodeStats> node_stats() const override {
    std::vector<RedisNodeStats> out;
    for (const Node& n : nodes_) out.push_back(stats_of(n));
    return out;
  }
  uint64_t reconnects() const override { return connector_.reconnects(); }
  uint64_t slot_refreshes() const override { return refreshes_; }
  uint64_t redirects() const override { return redirects_; }

 private:
  size_t node_index(const RedisEndpoint& ep) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].ep == ep) return i;
    nodes_.emplace_back();
    nodes_.back().ep = ep;
    return nodes_.size() - 1;
  }

  // CLUSTER SLOTS from the first node that answers: known nodes first, then the seeds.
  bool refresh_slots() {
    ++refreshes_;
    std::vector<RedisEndpoint> candidates;
    for (const Node& n : nodes_)
      if (n.conn.connected()) candidates.push_back(n.ep);
    for (const Node& n : nodes_) candidates.push_back(n.ep);
    candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
    std::vector<RedisEndpoint> tried;
    for (const RedisEndpoint& ep : candidates) {
      if (std::find(tried.begin(), tried.end(), ep) != tried.end()) continue;
      tried.push_back(ep);
      Node& n = nodes_[node_index(ep)];
      std::string error;
      if (!connector_.ensure(n, error)) continue;
      RedisReply r;
      if (!n.conn.command({"CLUSTER", "SLOTS"}, r, error)) {
        connector_.mark_failed(n);
        continue;
      }
      if (r.type != RedisReply::Type::kArray) continue;
      std::array<int, kClusterSlots> fresh;
      fresh.fill(-1);
      for (const RedisReply& range : r.elements) {
        if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
        long long lo = range.elements[0].integer, hi = range.elements[1].integer;
        const RedisReply& master = range.elements[2];
        RedisEndpoint mep;
        // An empty host means "the node you asked" (cluster-announce-hostname unset, unknown IP).
        mep.host = master.elements[0].str.empty() ? ep.host : master.elements[0].str;
        mep.port = uint16_t(master.elements[1].integer);
        int idx = int(node_index(mep));
        for (long long s = std::max(0LL, lo); s <= hi && s < kClusterSlots; ++s)
          fresh[size_t(s)] = idx;
      }
      slots_ = fresh;
      have_map_ = true;
      return true;
    }
    return false;
  }

  NodeConnector connector_;
  std::vector<RedisEndpoint> seeds_;
  std::deque<Node> nodes_;  // only appended: references stay valid (RedisConn cannot move)
  std::array<int, kClusterSlots> slots_;
  bool have_map_ = false;
  uint64_t refreshes_ = 0;
  uint64_t redirects_ = 0;
};

}  // namespace

std::unique_ptr<RedisExecutor> make_single_node_executor(const RedisEndpoint& ep,
                                                         const RedisConnOptions& opts) {
  return std::make_unique<SingleNodeExecutor>(ep, opts);
}

std::unique_ptr<RedisExecutor> make_cluster_executor(const std::vector<RedisEndpoint>& seeds,
                                                     const RedisConnOptions& opts) {
  return std::make_unique<ClusterExecutor>(seeds, opts);
}

}  // namespace spand
