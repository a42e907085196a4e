// The estimate service's window reads, pipelined: a batch of reads (one HMGET of a window's bucket
// fields each, the schema of redis_schema.hpp) answered in one round trip per Redis node. On a
// single node this is the Get hot path: the batch's commands are encoded into one buffer, sent
// with one write and their replies decoded straight from the connection's receive buffer into
// the reads' accumulators (RedisConn::send_raw, resp_window.hpp), without an argv of strings per
// read and a reply tree per bucket (about a hundred allocations a read, which made the reader
// threads the service's biggest CPU user). On a Redis Cluster the reads go through
// RedisStore::read_windows (slot map, redirects). Not thread-safe: one per reader thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "estimates/redis_store.hpp"
#include "estimates/store.hpp"

namespace spand {

class WindowReader {
 public:
  virtual ~WindowReader() = default;
  // Sets each read's acc, ok and error. A transport or protocol error fails the reads not yet
  // answered; the next batch reconnects. While a node stays down, connection attempts follow
  // ReconnectBackoff (100 ms doubling to 5 s) and reads in between fail at once with the last
  // error.
  virtual void read(WindowRead* const* reads, size_t n) = 0;
  // Connections re-established after a failure (first connections are not counted).
  virtual uint64_t reconnects() const = 0;
};

// The single-node reader when `opts.cluster_seeds` is empty, else the cluster one.
std::unique_ptr<WindowReader> make_window_reader(const RedisStoreOptions& opts);

}  // namespace spand
