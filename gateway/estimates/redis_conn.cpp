#include "estimates/redis_conn.hpp"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "estimates/sha1.hpp"

namespace spand {

namespace {

timeval to_timeval(uint32_t ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = suseconds_t(ms % 1000) * 1000;
  return tv;
}

void copy_reply(const redisReply* r, RedisReply& out) {
  out = RedisReply{};
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.resize(r->elements);
      for (size_t i = 0; i < r->elements; ++i) copy_reply(r->element[i], out.elements[i]);
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
}

}  // namespace

bool RedisReply::error_is(std::string_view code) const {
  if (type != Type::kError || str.size() < code.size()) return false;
  return str.compare(0, code.size(), code) == 0 &&
         (str.size() == code.size() || str[code.size()] == ' ');
}

bool parse_endpoint(std::string_view text, RedisEndpoint& out, std::string& error) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      error = "unterminated '[' in '" + std::string(text) + "'";
      return false;
    }
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        error = "expected ':' after ']' in '" + std::string(text) + "'";
        return false;
      }
      port = rest.substr(1);
    }
  } else {
    size_t colon = text.rfind(':');
    host = colon == std::string_view::npos ? text : text.substr(0, colon);
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  if (host.empty()) {
    error = "no host in '" + std::string(text) + "'";
    return false;
  }
  // A host name is passed on as a C string: a NUL would cut it ("127.0.0.1\0evil" connected to
  // 127.0.0.1), and no control character belongs in one.
  if (std::any_of(host.begin(), host.end(),
                  [](char c) { return uint8_t(c) < 0x20 || c == 0x7f; })) {
    error = "control character in the host of '" + std::string(text) + "'";
    return false;
  }
  out.host = std::string(host);
  out.port = 6379;
  if (!port.empty()) {
    unsigned long v = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || v > 65535) {
        error = "bad port in '" + std::string(text) + "'";
        return false;
      }
      v = v * 10 + unsigned(c - '0');
    }
    if (v == 0 || v > 65535) {
      error = "port out of range in '" + std::string(text) + "'";
      return false;
    }
    out.port = uint16_t(v);
  }
  return true;
}

bool parse_redis_url(std::string_view url, RedisEndpoint& ep, RedisAuth& auth, std::string& error) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    error = "Redis URL must start with redis:// (got '" + std::string(url) + "')";
    return false;
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      auth.user.clear();
      auth.password = std::string(cred);  // redis://password@host, as redis-cli accepts
    } else {
      auth.user = std::string(cred.substr(0, colon));
      auth.password = std::string(cred.substr(colon + 1));
    }
    rest = rest.substr(at + 1);
  }
  size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && db != "0") {
      error = "only database 0 is supported (Redis Cluster has no other)";
      return false;
    }
    rest = rest.substr(0, slash);
  }
  return parse_endpoint(rest, ep, error);
}

bool read_password_file(const std::string& path, std::string& password, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read password file " + path;
    return false;
  }
  std::getline(in, password);
  while (!password.empty() && (password.back() == '\r' || password.back() == ' ' ||
                               password.back() == '\t' || password.back() == '\n'))
    password.pop_back();
  return true;
}

RedisConn::~RedisConn() {
  close();
}

void RedisConn::close() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
  appended_unsent_ = 0;
  appended_unread_ = 0;
  unflushed_bytes_ = 0;
  in_begin_ = in_end_ = 0;
}

bool RedisConn::connect(const RedisEndpoint& ep, const RedisConnOptions& opts, std::string& error) {
  close();
  ep_ = ep;
  redisContext* c =
      redisConnectWithTimeout(ep.host.c_str(), ep.port, to_timeval(opts.connect_timeout_ms));
  if (c == nullptr) {
    error = "redis " + ep.to_string() + ": cannot allocate context";
    return false;
  }
  if (c->err) {
    error = "redis " + ep.to_string() + ": " + c->errstr;
    redisFree(c);
    return false;
  }
  redisSetTimeout(c, to_timeval(opts.command_timeout_ms));
  ctx_ = c;
  if (!opts.auth.password.empty()) {
    RedisArgv argv = {"AUTH"};
    if (!opts.auth.user.empty()) argv.push_back(opts.auth.user);
    argv.push_back(opts.auth.password);
    RedisReply r;
    if (!command(argv, r, error)) return false;
    if (r.is_error()) {
      // The password never goes into the message.
      error = "redis " + ep.to_string() + ": AUTH failed: " + r.str;
      close();
      return false;
    }
  }
  return true;
}

void RedisConn::append(const RedisArgv& argv) {
  if (!ctx_) return;
  std::vector<const char*> ptrs(argv.size());
  std::vector<size_t> lens(argv.size());
  for (size_t i = 0; i < argv.size(); ++i) {
    ptrs[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  redisAppendCommandArgv(ctx_, int(argv.size()), ptrs.data(), lens.data());
  ++appended_unsent_;
  ++appended_unread_;
  for (size_t l : lens) unflushed_bytes_ += l + 16;
  // hiredis drops written bytes from the front of one buffer (a memmove of the rest per write):
  // a 100k-command pipeline kept whole costs quadratic time. Writing as we go keeps it small;
  // replies are still read only after the whole batch is sent (one round trip).
  constexpr size_t kFlushBytes = 256 * 1024;
  if (unflushed_bytes_ >= kFlushBytes) {
    int done = 0;
    while (!done && ctx_->err == 0)
      if (redisBufferWrite(ctx_, &done) != REDIS_OK) break;
    unflushed_bytes_ = 0;
  }
}

bool RedisConn::read(RedisReply& out, std::string& error) {
  if (!ctx_) {
    error = "redis " + ep_.to_string() + ": not connected";
    return false;
  }
  if (in_begin_ != in_end_) {
    error = "redis " + ep_.to_string() + ": replies of a raw pipeline left unread";
    close();
    return false;
  }
  unflushed_bytes_ = 0;
  if (appended_unsent_ > 0) {
    ++round_trips_;
    commands_sent_ += appended_unsent_;
    appended_unsent_ = 0;
  }
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
    error =
        "redis " + ep_.to_string() + ": " + (ctx_->errstr[0] ? ctx_->errstr : "connection lost");
    close();
    return false;
  }
  copy_reply(static_cast<redisReply*>(raw), out);
  freeReplyObject(raw);
  if (appended_unread_ > 0) --appended_unread_;
  return true;
}

bool RedisConn::command(const RedisArgv& argv, RedisReply& out, std::string& error) {
  if (!ctx_) {
    error = "redis " + ep_.to_string() + ": not connected";
    return false;
  }
  append(argv);
  return read(out, error);
}

bool RedisConn::send_raw(std::string_view commands, size_t count, std::string& error) {
  if (!ctx_) {
    error = "redis " + ep_.to_string() + ": not connected";
    return false;
  }
  // The replies must arrive in our buffer, not hiredis's: nothing of an argv pipeline may be
  // outstanding, nor anything of an earlier raw one.
  if (appended_unread_ > 0 || ctx_->reader->pos < ctx_->reader->len || in_begin_ != in_end_) {
    error = "redis " + ep_.to_string() + ": raw pipeline sent while other replies are unread";
    close();
    return false;
  }
  in_begin_ = in_end_ = 0;
  size_t off = 0;
  while (off < commands.size()) {
    const ssize_t n = ::send(ctx_->fd, commands.data() + off, commands.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "redis " + ep_.to_string() + ": " +
              (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? std::string("write timeout")
                                                                  : std::strerror(errno));
      close();
      return false;
    }
    off += size_t(n);
  }
  ++round_trips_;
  commands_sent_ += count;
  return true;
}

bool RedisConn::receive_more(std::string& error) {
  if (!ctx_) {
    error = "redis " + ep_.to_string() + ": not connected";
    return false;
  }
  constexpr size_t kInitialBytes = 64 * 1024;
  if (in_.empty()) in_.resize(kInitialBytes);
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ > 0 && in_end_ == in_.size()) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ == in_.size()) in_.resize(in_.size() * 2);  // one reply larger than the buffer
  for (;;) {
    // Blocking, bounded by the command timeout (redisSetTimeout's SO_RCVTIMEO).
    const ssize_t n = ::recv(ctx_->fd, in_.data() + in_end_, in_.size() - in_end_, 0);
    if (n > 0) {
      in_end_ += size_t(n);
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    error = "redis " + ep_.to_string() + ": " +
            (n == 0                                    ? std::string("connection closed")
             : errno == EAGAIN || errno == EWOULDBLOCK ? std::string("read timeout")
                                                       : std::string(std::strerror(errno)));
    close();
    return false;
  }
}

std::string script_sha1(std::string_view source) {
  return sha1_hex(source);
}

RedisArgv evalsha_argv(const RedisScript& script, const RedisArgv& keys, const RedisArgv& args) {
  RedisArgv argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1.empty() ? script_sha1(script.source) : script.sha1);
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

bool eval_script(RedisConn& conn, const RedisScript& script, const RedisArgv& keys,
                 const RedisArgv& args, RedisReply& out, std::string& error) {
  RedisArgv argv = evalsha_argv(script, keys, args);
  if (!conn.command(argv, out, error)) return false;
  if (!out.error_is("NOSCRIPT")) return true;
  RedisReply loaded;
  if (!conn.command({"SCRIPT", "LOAD", script.source}, loaded, error)) return false;
  if (loaded.is_error()) {
    error = "SCRIPT LOAD: " + loaded.str;
    return false;
  }
  return conn.command(argv, out, error);
}

}  // namespace spand
