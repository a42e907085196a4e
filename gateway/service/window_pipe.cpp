#include "service/window_pipe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "estimates/redis_schema.hpp"
#include "service/resp_reply.hpp"

namespace spand {
namespace {

void append_uint(std::string& s, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void append_bulk(std::string& s, std::string_view v) {
  s += '$';
  append_uint(s, v.size());
  s += "\r\n";
  s += v;
  s += "\r\n";
}

}  // namespace

WindowPipe::WindowPipe(const RedisEndpoint& ep, const RedisConnOptions& conn,
                       const WindowOptions& window)
    : ep_(ep), conn_(conn), window_(window), in_(64 * 1024) {}

WindowPipe::~WindowPipe() {
  close();
}

void WindowPipe::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_begin_ = in_end_ = 0;
}

bool WindowPipe::connect(std::string& error) {
  close();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(ep_.port);
  if (int rc = getaddrinfo(ep_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error = "redis " + ep_.to_string() + ": " + gai_strerror(rc);
    return false;
  }
  error = "redis " + ep_.to_string() + ": no address";
  for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      rc = poll(&pfd, 1, int(conn_.connect_timeout_ms));
      int soerr = 0;
      socklen_t len = sizeof soerr;
      if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : (soerr ? soerr : errno);
        rc = -1;
      }
    }
    if (rc != 0) {
      error = "redis " + ep_.to_string() + ": " + std::strerror(errno);
      ::close(fd);
      continue;
    }
    fd_ = fd;
  }
  freeaddrinfo(res);
  if (fd_ < 0) return false;
  // Blocking from here on, each send or receive bounded by the command timeout.
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = conn_.command_timeout_ms / 1000;
  tv.tv_usec = (conn_.command_timeout_ms % 1000) * 1000;
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    error = "redis " + ep_.to_string() + ": fcntl: " + std::strerror(errno);
    close();
    return false;
  }
  if (!conn_.auth.password.empty()) {
    out_.clear();
    out_ += conn_.auth.user.empty() ? "*2\r\n" : "*3\r\n";
    append_bulk(out_, "AUTH");
    if (!conn_.auth.user.empty()) append_bulk(out_, conn_.auth.user);
    append_bulk(out_, conn_.auth.password);
    if (!send_all(out_, error)) return false;
    for (;;) {
      resp::Reply r;
      Accumulator unused;
      size_t used = 0;
      const resp::Parse s =
          resp::parse_reply(in_.data() + in_begin_, in_.data() + in_end_, r, unused, used);
      if (s == resp::Parse::kIncomplete) {
        if (!receive(error)) return false;
        continue;
      }
      if (s == resp::Parse::kBad || r.type != resp::Reply::Type::kStatus) {
        // The password never goes into the message.
        error = "redis " + ep_.to_string() + ": AUTH failed" +
                (r.type == resp::Reply::Type::kError ? ": " + std::string(r.text) : std::string());
        close();
        return false;
      }
      in_begin_ += used;
      break;
    }
  }
  return true;
}

bool WindowPipe::ensure_connected(std::string& error) {
  if (fd_ >= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_at_) {
    error = last_error_;
    return false;
  }
  if (!connect(error)) {
    last_error_ = error;
    retry_at_ = now + std::chrono::milliseconds(kRetryMs);
    return false;
  }
  if (connected_once_) ++reconnects_;
  connected_once_ = true;
  return true;
}

bool WindowPipe::send_all(const std::string& data, std::string& error) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
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
  return true;
}

bool WindowPipe::receive(std::string& error) {
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ > 0 && in_end_ == in_.size()) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ == in_.size()) in_.resize(in_.size() * 2);  // one reply larger than the buffer
  for (;;) {
    const ssize_t n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
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

void WindowPipe::append_read(const WindowReadOp& op) {
  const uint64_t bucket = bucket_start_of(op.now_ns, window_.bucket_s);
  if (bucket != fields_bucket_) {
    fields_.clear();
    const std::vector<uint64_t> buckets =
        window_buckets(op.now_ns, window_.window_s, window_.bucket_s);
    for (uint64_t b : buckets) append_bulk(fields_, bucket_field(b));
    nfields_ = buckets.size();
    fields_bucket_ = bucket;
  }
  out_ += '*';
  append_uint(out_, 2 + nfields_);
  out_ += "\r\n$5\r\nHMGET\r\n";
  append_bulk(out_, window_key(op.prefix, window_.key_prefix));
  out_ += fields_;
}

void WindowPipe::read(WindowReadOp* const* ops, size_t n) {
  if (n == 0) return;
  std::string error;
  size_t done = 0;
  if (ensure_connected(error)) {
    out_.clear();
    for (size_t i = 0; i < n; ++i) append_read(*ops[i]);
    if (send_all(out_, error)) {
      while (done < n) {
        WindowReadOp& op = *ops[done];
        resp::Reply r;
        size_t used = 0;
        const resp::Parse s =
            resp::parse_reply(in_.data() + in_begin_, in_.data() + in_end_, r, op.acc, used);
        if (s == resp::Parse::kIncomplete) {
          if (!receive(error)) break;
          continue;
        }
        if (s == resp::Parse::kBad) {
          error = "redis " + ep_.to_string() + ": protocol error";
          close();
          break;
        }
        in_begin_ += used;
        op.error.clear();
        op.ok = false;
        if (r.type == resp::Reply::Type::kError) {
          op.error = r.text;
        } else if (r.type != resp::Reply::Type::kArray) {
          op.error = "unexpected reply to the window read";
        } else if (r.bad_value) {
          op.error = "malformed bucket value '" + std::string(r.bad_text) + "'";
        } else {
          op.ok = true;
        }
        if (!op.ok) op.acc = Accumulator{};
        ++done;
      }
    }
  }
  for (size_t i = done; i < n; ++i) {
    ops[i]->ok = false;
    ops[i]->acc = Accumulator{};
    ops[i]->error = error;
  }
}

}  // namespace spand
