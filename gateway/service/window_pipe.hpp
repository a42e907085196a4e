// The Get hot path's Redis reader on one node: a connection of its own that sends a batch of
// window reads (one HMGET of the window's bucket fields each, the schema of redis_schema.hpp) in
// one write and decodes the replies straight from its receive buffer into the ops' accumulators.
// It does what RedisStore::read_windows does for a single node, without building an argv of
// strings per read and a reply tree per bucket (about a hundred allocations a read), which made
// the reader threads the service's biggest CPU user. Redis Cluster reads keep going through
// RedisStore (redirects, slot map). Not thread-safe: one per reader thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "estimates/redis_store.hpp"
#include "service/estimates_core.hpp"

namespace spand {

class WindowPipe {
 public:
  WindowPipe(const RedisEndpoint& ep, const RedisConnOptions& conn, const WindowOptions& window);
  ~WindowPipe();
  WindowPipe(const WindowPipe&) = delete;
  WindowPipe& operator=(const WindowPipe&) = delete;

  // One round trip for all `n` reads: sets each op's acc, ok and error (does not complete them).
  // A transport or protocol error closes the connection and fails the reads not yet answered; the
  // next batch reconnects (at most one attempt per kRetryMs while Redis stays down).
  void read(WindowReadOp* const* ops, size_t n);

  uint64_t reconnects() const { return reconnects_; }

  static constexpr uint32_t kRetryMs = 100;

 private:
  bool ensure_connected(std::string& error);
  bool connect(std::string& error);
  void close();
  bool send_all(const std::string& data, std::string& error);
  // Reads more bytes into in_ (blocking up to the command timeout).
  bool receive(std::string& error);
  void append_read(const WindowReadOp& op);

  RedisEndpoint ep_;
  RedisConnOptions conn_;
  WindowOptions window_;
  int fd_ = -1;
  bool connected_once_ = false;
  uint64_t reconnects_ = 0;
  std::chrono::steady_clock::time_point retry_at_{};
  std::string last_error_;
  std::string out_;       // the batch's commands, reused
  std::vector<char> in_;  // receive buffer: [in_begin_, in_end_) unparsed
  size_t in_begin_ = 0, in_end_ = 0;
  uint64_t fields_bucket_ = UINT64_MAX;  // bucket whose window fields_ encodes
  std::string fields_;                   // "$len\r\nfield\r\n" per bucket of that window
  size_t nfields_ = 0;
};

}  // namespace spand
