// Runs batches of Redis commands, pipelined, on one node or on a Redis Cluster (routing by key
// slot, MOVED/ASK, node loss). One round trip per node per batch in the steady state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "estimates/redis_conn.hpp"

namespace spand {

struct RedisCommand {
  RedisArgv argv;
  std::string route_key;                // the key whose slot picks the cluster node
  const RedisScript* script = nullptr;  // set for EVALSHA: SCRIPT LOAD and retry on NOSCRIPT
};

struct RedisResult {
  bool delivered = false;  // a reply came back (it may itself be an error reply)
  RedisReply reply;
  std::string error;  // why no reply: connection, timeout, no node for the slot, backoff
};

struct RedisNodeStats {
  std::string node;          // host:port
  uint64_t round_trips = 0;  // pipelines sent and answered, including AUTH/SCRIPT LOAD/refresh
  uint64_t commands = 0;
  bool up = false;
};

class RedisExecutor {
 public:
  virtual ~RedisExecutor() = default;
  // Scripts loaded on every (re)connection so that EVALSHA does not need a second round trip.
  virtual void preload(const RedisScript* script) = 0;
  // results[i] answers cmds[i]. Commands for a node that is down (and still inside its backoff)
  // fail at once without touching the network.
  virtual void execute(const std::vector<RedisCommand>& cmds,
                       std::vector<RedisResult>& results) = 0;
  virtual std::vector<RedisNodeStats> node_stats() const = 0;
  // Connections re-established after a failure (first connections are not counted).
  virtual uint64_t reconnects() const = 0;
  // Slot map refreshes (cluster only).
  virtual uint64_t slot_refreshes() const { return 0; }
  virtual uint64_t redirects() const { return 0; }  // MOVED + ASK replies followed
};

std::unique_ptr<RedisExecutor> make_single_node_executor(const RedisEndpoint& ep,
                                                         const RedisConnOptions& opts);
std::unique_ptr<RedisExecutor> make_cluster_executor(const std::vector<RedisEndpoint>& seeds,
                                                     const RedisConnOptions& opts);

}  // namespace spand
