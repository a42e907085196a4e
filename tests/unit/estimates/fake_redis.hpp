// A small in-process Redis for the window reader's and the read pool's tests: a RESP server on
// 127.0.0.1 that answers HMGET from a map and AUTH against a password, and can send its replies
// a byte at a time or hang up after N commands.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/prefix.hpp"
#include "estimates/redis_schema.hpp"

namespace spand::test {

inline constexpr uint64_t kNowNs = 1'700'000'123'000'000'000ULL;

// A RESP server on 127.0.0.1 answering HMGET from `hashes` and AUTH against `password`.
class FakeRedis {
 public:
  std::mutex mu;
  std::map<std::string, std::map<std::string, std::string>> hashes;  // guarded by mu
  std::map<std::string, std::string> errors;  // key -> error reply text, guarded by mu
  std::string user, password;                 // AUTH required when password is set
  bool dribble = false;                       // send replies one byte at a time
  std::atomic<int> close_after{-1};           // close the connection after N commands
  std::atomic<int> connections{0};
  std::atomic<int> commands{0};

  FakeRedis() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~FakeRedis() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (std::thread& t : conns_) t.join();
  }
  void set(const Prefix& p, uint64_t bucket_s, const std::string& value) {
    std::lock_guard lock(mu);
    hashes[window_key(p)][bucket_field(bucket_s)] = value;
  }

  uint16_t port = 0;

 private:
  void accept_loop() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections;
      const int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns_.emplace_back([this, c] { serve(c); });
    }
  }
  static bool read_line(int c, std::string& buf, std::string& line) {
    for (;;) {
      const size_t pos = buf.find("\r\n");
      if (pos != std::string::npos) {
        line = buf.substr(0, pos);
        buf.erase(0, pos + 2);
        return true;
      }
      char tmp[4096];
      const ssize_t n = recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, size_t(n));
    }
  }
  void send_reply(int c, const std::string& r) {
    if (!dribble) {
      send(c, r.data(), r.size(), MSG_NOSIGNAL);
      return;
    }
    for (char ch : r) {
      send(c, &ch, 1, MSG_NOSIGNAL);
      if (ch == '\n') std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  static std::string bulk(const std::string& s) {
    return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  }
  void serve(int c) {
    std::string buf, line;
    bool authed = password.empty();
    while (read_line(c, buf, line)) {
      if (line.empty() || line[0] != '*') break;
      std::vector<std::string> argv(std::stoul(line.substr(1)));
      for (std::string& a : argv) {
        if (!read_line(c, buf, line) || line[0] != '$') return;
        const size_t len = std::stoul(line.substr(1));
        while (buf.size() < len + 2) {
          char tmp[4096];
          const ssize_t n = recv(c, tmp, sizeof tmp, 0);
          if (n <= 0) return;
          buf.append(tmp, size_t(n));
        }
        a = buf.substr(0, len);
        buf.erase(0, len + 2);
      }
      if (close_after >= 0 && commands >= close_after) break;
      ++commands;
      std::string reply;
      if (argv[0] == "AUTH") {
        const bool ok = argv.size() == 3 ? argv[1] == user && argv[2] == password
                                         : user.empty() && argv[1] == password;
        authed = ok;
        reply = ok ? "+OK\r\n" : "-WRONGPASS invalid username-password pair\r\n";
      } else if (!authed) {
        reply = "-NOAUTH Authentication required.\r\n";
      } else if (argv[0] == "HMGET" && argv.size() >= 3) {
        std::lock_guard lock(mu);
        if (auto e = errors.find(argv[1]); e != errors.end()) {
          reply = "-" + e->second + "\r\n";
        } else {
          reply = "*" + std::to_string(argv.size() - 2) + "\r\n";
          const auto h = hashes.find(argv[1]);
          for (size_t i = 2; i < argv.size(); ++i) {
            const bool found = h != hashes.end() && h->second.contains(argv[i]);
            reply += found ? bulk(h->second.at(argv[i])) : "$-1\r\n";
          }
        }
      } else {
        reply = "-ERR unknown command\r\n";
      }
      send_reply(c, reply);
    }
    ::close(c);
  }

  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> conns_;
};

inline Prefix v4_prefix(const char* text) {
  uint8_t b[4];
  EXPECT_EQ(inet_pton(AF_INET, text, b), 1);
  return prefix_of(IpAddr::from_v4(b), PrefixConfig{});
}

inline uint64_t now_bucket() {
  return bucket_start_of(kNowNs, WindowOptions{}.bucket_s);
}

}  // namespace spand::test
