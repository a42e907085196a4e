// Starts and stops real redis-server processes on free loopback ports, each in its own temporary
// directory, for the integration tests. Readiness is polled (PING) against a bounded deadline.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "estimates/redis_conn.hpp"

namespace spand::test {

// A loopback TCP port that was free a moment ago; with `plus_bus`, port + 10000 (the cluster bus)
// was free too.
uint16_t free_port(bool plus_bus = false);

class RedisServer {
 public:
  // `extra` are redis-server options ("--requirepass", "pw", ...).
  RedisServer(std::vector<std::string> extra = {}, bool cluster = false);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool start(std::string& error);  // same port and directory every time (nodes.conf survives)
  void stop();                     // SIGTERM, waits for exit
  void kill9();                    // SIGKILL, waits for exit
  bool running() const { return pid_ > 0; }

  uint16_t port() const { return port_; }
  RedisEndpoint endpoint() const { return {"127.0.0.1", port_}; }
  const std::string& dir() const { return dir_; }
  // A connection (AUTH with `auth` if given) for test-side commands.
  bool connect(RedisConn& c, const RedisAuth& auth = {}) const;

 private:
  void reap();
  std::vector<std::string> extra_;
  bool cluster_;
  uint16_t port_;
  std::string dir_;
  pid_t pid_ = -1;
};

// Runs a program (argv[0] looked up in PATH) and returns its exit status and stdout+stderr.
int run_program(const std::vector<std::string>& argv, std::string& output);

// Polls `ready` every 10 ms until it returns true or `timeout_ms` passes.
template <class F>
bool poll_until(F ready, int timeout_ms);

}  // namespace spand::test

#include <chrono>
#include <thread>

template <class F>
bool spand::test::poll_until(F ready, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
