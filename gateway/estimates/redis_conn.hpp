// The project's one Redis client, synchronous, over hiredis: connect with a timeout, AUTH
// (password or ACL user + password), pipelining (append many commands, then read all replies),
// EVALSHA with a SCRIPT LOAD fallback on NOSCRIPT, and pre-encoded pipelines whose replies the
// caller decodes in place (the estimate service's window reads, window_reader.hpp). Used by the
// writer's flush thread, the service's reader threads and the tools; one connection per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;

namespace spand {

// A reply copied out of hiredis, so callers never hold hiredis memory.
struct RedisReply {
  enum class Type : uint8_t { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<RedisReply> elements;

  bool is_error() const { return type == Type::kError; }
  // True for an error reply whose first word is `code` ("MOVED", "ASK", "NOSCRIPT").
  bool error_is(std::string_view code) const;
};

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string to_string() const { return host + ":" + std::to_string(port); }
  bool operator==(const RedisEndpoint&) const = default;
};

struct RedisAuth {
  std::string user;      // "" = AUTH password (requirepass or the default user)
  std::string password;  // "" = no AUTH
};

struct RedisConnOptions {
  uint32_t connect_timeout_ms = 200;
  uint32_t command_timeout_ms = 1000;  // per socket read or write, not per pipeline
  RedisAuth auth;
};

// "host:port" or "[v6]:port".
bool parse_endpoint(std::string_view text, RedisEndpoint& out, std::string& error);
// redis://[[user]:password@]host[:port][/db]; db must be 0 (cluster has only db 0).
bool parse_redis_url(std::string_view url, RedisEndpoint& ep, RedisAuth& auth, std::string& error);
// First line of a file, trailing whitespace removed.
bool read_password_file(const std::string& path, std::string& password, std::string& error);

using RedisArgv = std::vector<std::string>;

class RedisConn {
 public:
  RedisConn() = default;
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // Connects (and AUTHs) with the options' timeouts; closes any previous connection.
  bool connect(const RedisEndpoint& ep, const RedisConnOptions& opts, std::string& error);
  bool connected() const { return ctx_ != nullptr; }
  void close();
  const RedisEndpoint& endpoint() const { return ep_; }

  // Pipelining: append() buffers a command; read() sends what is buffered (on the first read)
  // and returns the next reply. A transport error (timeout, reset) closes the connection and
  // returns false: the replies of the remaining appended commands are lost.
  void append(const RedisArgv& argv);
  bool read(RedisReply& out, std::string& error);
  // One command, one round trip.
  bool command(const RedisArgv& argv, RedisReply& out, std::string& error);

  // Pre-encoded pipelining, for replies decoded straight from the receive buffer without a
  // reply tree (about a hundred allocations less per window read): send_raw() writes `count`
  // commands already in RESP form with one send; the caller then decodes their replies from
  // received(), consume()s each one and calls receive_more() when a reply is not all there yet.
  // Not mixed with append() in one pipeline: false, and the connection closed, if an appended
  // command's reply is still unread. A transport error closes the connection.
  bool send_raw(std::string_view commands, size_t count, std::string& error);
  std::string_view received() const {
    return std::string_view(in_.data() + in_begin_, in_end_ - in_begin_);
  }
  void consume(size_t bytes) { in_begin_ += bytes; }
  // Waits (up to the command timeout) for more bytes after received().
  bool receive_more(std::string& error);

  // Round trips: batches of appended commands sent and answered (one per pipeline).
  uint64_t round_trips() const { return round_trips_; }
  uint64_t commands_sent() const { return commands_sent_; }

 private:
  redisContext* ctx_ = nullptr;
  RedisEndpoint ep_;
  size_t appended_unsent_ = 0;
  size_t appended_unread_ = 0;  // appended commands whose reply read() has not returned yet
  size_t unflushed_bytes_ = 0;  // approximate size of hiredis's output buffer
  std::vector<char> in_;        // send_raw's replies: [in_begin_, in_end_) not consumed yet
  size_t in_begin_ = 0, in_end_ = 0;
  uint64_t round_trips_ = 0;
  uint64_t commands_sent_ = 0;
};

// A Lua script known by its text and SHA1 (computed once by SCRIPT LOAD on first use).
struct RedisScript {
  std::string source;
  std::string sha1;  // hex; filled by load() or ensure_sha1()
};

// SHA1 hex of the script text, as Redis computes it for EVALSHA.
std::string script_sha1(std::string_view source);

// EVALSHA; on NOSCRIPT loads the script and retries once. One round trip when the script is
// cached on the server.
bool eval_script(RedisConn& conn, const RedisScript& script, const RedisArgv& keys,
                 const RedisArgv& args, RedisReply& out, std::string& error);

// Builds "EVALSHA sha numkeys keys... args...".
RedisArgv evalsha_argv(const RedisScript& script, const RedisArgv& keys, const RedisArgv& args);

}  // namespace spand
