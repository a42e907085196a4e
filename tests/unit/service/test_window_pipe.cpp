// WindowPipe (the Get path's Redis reader) and StorePool against a small in-process server that
// speaks enough RESP to answer HMGET and AUTH from a map: command encoding, replies split at
// every byte, error replies, malformed values, AUTH, a dropped connection and a refused one,
// and the pool's queue (coalescing, completion from the reader threads, synchronous reads).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "control/service_stack.hpp"
#include "estimates/redis_schema.hpp"
#include "service/window_pipe.hpp"

namespace spand {
namespace {

constexpr uint64_t kNowNs = 1'700'000'123'000'000'000ULL;

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

Prefix v4_prefix(const char* text) {
  uint8_t b[4];
  EXPECT_EQ(inet_pton(AF_INET, text, b), 1);
  return prefix_of(IpAddr::from_v4(b), PrefixConfig{});
}

struct Op final : WindowReadOp {
  int completed = 0;
  void complete() override { ++completed; }
};

uint64_t now_bucket() {
  return bucket_start_of(kNowNs, WindowOptions{}.bucket_s);
}

struct PipeTest : ::testing::Test {
  FakeRedis redis;
  RedisEndpoint ep() const { return RedisEndpoint{"127.0.0.1", redis.port}; }
  RedisConnOptions conn;
  WindowOptions window;
  std::vector<Op> ops;
  std::vector<WindowReadOp*> ptrs;
  void make_ops(std::initializer_list<const char*> prefixes) {
    ops = std::vector<Op>(prefixes.size());
    ptrs.clear();
    size_t i = 0;
    for (const char* p : prefixes) {
      ops[i].prefix = v4_prefix(p);
      ops[i].now_ns = kNowNs;
      ptrs.push_back(&ops[i++]);
    }
  }
};

TEST_F(PipeTest, SumsTheWindowsBucketsAndSkipsOthers) {
  const Prefix a = v4_prefix("198.51.100.0"), b = v4_prefix("203.0.113.0");
  const uint64_t cur = now_bucket();
  redis.set(a, cur, "3 60 1250 2 80000 30000 1700000123000000000 3 0 1");
  redis.set(a, cur - 20, "2 20 200 0 0 0 1700000100000000000 2 0 1");
  redis.set(a, cur - window.window_s - 10, "100 100 100 0 0 0 1 100 0 1");  // out of the window
  redis.set(b, cur - 10, "1 7 49 1 5000 5000 1700000110000000000 0 1 1");
  WindowPipe pipe(ep(), conn, window);
  for (bool dribble : {false, true}) {
    redis.dribble = dribble;
    make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0"});
    pipe.read(ptrs.data(), ptrs.size());
    for (const Op& op : ops) {
      EXPECT_TRUE(op.ok) << op.error;
      EXPECT_EQ(op.completed, 0);  // the pool completes, not the pipe
    }
    EXPECT_EQ(ops[0].acc.wc_count, 5u);
    EXPECT_DOUBLE_EQ(ops[0].acc.wc_sum, 80);
    EXPECT_DOUBLE_EQ(ops[0].acc.wc_sumsq, 1450);
    EXPECT_EQ(ops[0].acc.rtt_count, 2u);
    EXPECT_EQ(ops[0].acc.rtt_min_us, 30000u);
    EXPECT_EQ(ops[0].acc.newest_ts_ns, 1700000123000000000u);
    EXPECT_EQ(ops[1].acc.wc_count, 1u);
    EXPECT_EQ(ops[1].acc.rtt_count, 1u);
    EXPECT_EQ(ops[2].acc.wc_count, 0u);
    EXPECT_EQ(ops[2].acc.rtt_count, 0u);
  }
  EXPECT_EQ(redis.connections, 1);
  EXPECT_EQ(pipe.reconnects(), 0u);
}

TEST_F(PipeTest, ErrorRepliesAndMalformedValuesFailOnlyTheirRead) {
  const Prefix a = v4_prefix("198.51.100.0");
  redis.set(a, now_bucket(), "not a bucket");
  {
    std::lock_guard lock(redis.mu);
    redis.errors[window_key(v4_prefix("203.0.113.0"))] = "WRONGTYPE Operation against a key";
  }
  WindowPipe pipe(ep(), conn, window);
  make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0"});
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("malformed bucket value 'not a bucket'"), std::string::npos)
      << ops[0].error;
  EXPECT_FALSE(ops[1].ok);
  EXPECT_EQ(ops[1].error, "WRONGTYPE Operation against a key");
  EXPECT_TRUE(ops[2].ok) << ops[2].error;
  // The connection stays usable after error replies.
  make_ops({"192.0.2.0"});
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok);
  EXPECT_EQ(redis.connections, 1);
}

TEST_F(PipeTest, AuthWithUserAndPassword) {
  redis.user = "spand";
  redis.password = "s3cret";
  make_ops({"198.51.100.0"});
  {
    RedisConnOptions wrong = conn;
    wrong.auth = RedisAuth{"spand", "nope"};
    WindowPipe pipe(ep(), wrong, window);
    pipe.read(ptrs.data(), ptrs.size());
    EXPECT_FALSE(ops[0].ok);
    EXPECT_NE(ops[0].error.find("AUTH failed"), std::string::npos) << ops[0].error;
    EXPECT_EQ(ops[0].error.find("nope"), std::string::npos) << "password in the message";
  }
  conn.auth = RedisAuth{"spand", "s3cret"};
  WindowPipe pipe(ep(), conn, window);
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok) << ops[0].error;
}

TEST_F(PipeTest, DroppedConnectionFailsTheRestThenReconnects) {
  WindowPipe pipe(ep(), conn, window);
  redis.close_after = 2;  // answers two reads of the batch, then hangs up
  make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0", "192.0.2.128"});
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok);
  EXPECT_TRUE(ops[1].ok);
  EXPECT_FALSE(ops[2].ok);
  EXPECT_FALSE(ops[3].ok);
  EXPECT_NE(ops[2].error.find("redis 127.0.0.1:"), std::string::npos) << ops[2].error;
  redis.close_after = -1;
  make_ops({"198.51.100.0"});
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok) << ops[0].error;
  EXPECT_EQ(pipe.reconnects(), 1u);
  EXPECT_EQ(redis.connections, 2);
}

TEST_F(PipeTest, RefusedConnectionFailsFastUntilTheRetryTime) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);  // a port with nobody listening
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  WindowPipe pipe(RedisEndpoint{"127.0.0.1", ntohs(a.sin_port)}, conn, window);
  make_ops({"198.51.100.0"});
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("refused"), std::string::npos) << ops[0].error;
  const auto t0 = std::chrono::steady_clock::now();
  pipe.read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("refused"), std::string::npos) << ops[0].error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(WindowPipe::kRetryMs));
  ::close(fd);
}

// The pool: reads queued from many threads are answered, completed on a reader thread, and
// coalesced into fewer pipelines than reads while the readers are busy.
TEST(StorePoolTest, CompletesEveryQueuedReadAndCoalesces) {
  FakeRedis redis;
  redis.dribble = true;  // slow replies: reads pile up behind the first pipeline
  const Prefix a = v4_prefix("198.51.100.0");
  redis.set(a, now_bucket(), "6 60 600 0 0 0 1700000123000000000 6 0 1");
  RedisStoreOptions opts;
  opts.endpoint = RedisEndpoint{"127.0.0.1", redis.port};
  StorePool pool(opts, 2);

  struct CountingOp final : WindowReadOp {
    std::mutex* mu;
    std::condition_variable* cv;
    int* done;
    std::thread::id completed_on;
    void complete() override {
      completed_on = std::this_thread::get_id();
      std::lock_guard lock(*mu);
      ++*done;
      cv->notify_all();
    }
  };
  constexpr int kReads = 200;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<CountingOp> ops(kReads);
  for (CountingOp& op : ops) {
    op.prefix = a;
    op.now_ns = kNowNs;
    op.mu = &mu;
    op.cv = &cv;
    op.done = &done;
  }
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&, t] {
      for (int i = t; i < kReads; i += 4) {
        WindowReadOp* p = &ops[size_t(i)];
        pool.read_async(&p, 1);
      }
    });
  }
  for (std::thread& s : senders) s.join();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return done == kReads; }));
  }
  for (const CountingOp& op : ops) {
    EXPECT_TRUE(op.ok) << op.error;
    EXPECT_EQ(op.acc.wc_count, 6u);
    EXPECT_NE(op.completed_on, std::this_thread::get_id());
  }
  const StorePool::Stats st = pool.stats();
  EXPECT_EQ(st.reads, uint64_t(kReads));
  EXPECT_LT(st.batches, st.reads);

  Accumulator acc;
  std::string error;
  ASSERT_TRUE(pool.read_window(a, kNowNs, acc, error)) << error;
  EXPECT_EQ(acc.wc_count, 6u);
}

// After stop() (the service shutting down) no reader is left: a read is answered at once, on the
// caller's thread, with an error, rather than left in a queue nobody serves.
TEST(StorePoolTest, ReadAfterStopIsAnsweredAtOnce) {
  FakeRedis redis;
  RedisStoreOptions opts;
  opts.endpoint = RedisEndpoint{"127.0.0.1", redis.port};
  StorePool pool(opts, 2);
  pool.stop();
  pool.stop();  // idempotent, and the destructor stops again
  struct ThreadOp final : WindowReadOp {
    std::thread::id completed_on;
    int completions = 0;
    void complete() override {
      completed_on = std::this_thread::get_id();
      ++completions;
    }
  };
  ThreadOp op;
  op.prefix = v4_prefix("198.51.100.0");
  op.now_ns = kNowNs;
  WindowReadOp* p = &op;
  pool.read_async(&p, 1);
  EXPECT_EQ(op.completions, 1);
  EXPECT_EQ(op.completed_on, std::this_thread::get_id());
  EXPECT_FALSE(op.ok);
  EXPECT_EQ(op.error, "shutting down");
}

}  // namespace
}  // namespace spand
