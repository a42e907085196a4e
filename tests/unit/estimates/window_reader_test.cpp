// The estimate service's window reader on a single node (estimates/window_reader.cpp: one send
// per batch through RedisConn::send_raw, replies decoded in place) against a small in-process
// server (fake_redis.hpp): command encoding and window sums, replies split at every byte, error
// replies and malformed values failing only their read, AUTH, a dropped connection and a refused
// one.
#include "estimates/window_reader.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "estimates/reconnect_backoff.hpp"
#include "fake_redis.hpp"

namespace spand {
namespace {

using test::FakeRedis;
using test::kNowNs;
using test::now_bucket;
using test::v4_prefix;

struct WindowReaderTest : ::testing::Test {
  FakeRedis redis;
  RedisEndpoint ep() const { return RedisEndpoint{"127.0.0.1", redis.port}; }
  RedisConnOptions conn;
  WindowOptions window;
  std::vector<WindowRead> ops;
  std::vector<WindowRead*> ptrs;
  std::unique_ptr<WindowReader> reader(const RedisConnOptions& c,
                                       const RedisEndpoint& endpoint) const {
    RedisStoreOptions opts;
    opts.endpoint = endpoint;
    opts.conn = c;
    opts.window = window;
    return make_window_reader(opts);
  }
  std::unique_ptr<WindowReader> reader(const RedisConnOptions& c) const { return reader(c, ep()); }
  void make_ops(std::initializer_list<const char*> prefixes) {
    ops = std::vector<WindowRead>(prefixes.size());
    ptrs.clear();
    size_t i = 0;
    for (const char* p : prefixes) {
      ops[i].prefix = v4_prefix(p);
      ops[i].now_ns = kNowNs;
      ptrs.push_back(&ops[i++]);
    }
  }
};

TEST_F(WindowReaderTest, SumsTheWindowsBucketsAndSkipsOthers) {
  const Prefix a = v4_prefix("198.51.100.0"), b = v4_prefix("203.0.113.0");
  const uint64_t cur = now_bucket();
  redis.set(a, cur, "3 60 1250 2 80000 30000 1700000123000000000 3 0 1");
  redis.set(a, cur - 20, "2 20 200 0 0 0 1700000100000000000 2 0 1");
  redis.set(a, cur - window.window_s - 10, "100 100 100 0 0 0 1 100 0 1");  // out of the window
  redis.set(b, cur - 10, "1 7 49 1 5000 5000 1700000110000000000 0 1 1");
  const auto rd = reader(conn);
  for (bool dribble : {false, true}) {
    redis.dribble = dribble;
    make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0"});
    rd->read(ptrs.data(), ptrs.size());
    for (const WindowRead& op : ops) EXPECT_TRUE(op.ok) << op.error;
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
  EXPECT_EQ(rd->reconnects(), 0u);
}

TEST_F(WindowReaderTest, ErrorRepliesAndMalformedValuesFailOnlyTheirRead) {
  const Prefix a = v4_prefix("198.51.100.0");
  redis.set(a, now_bucket(), "not a bucket");
  {
    std::lock_guard lock(redis.mu);
    redis.errors[window_key(v4_prefix("203.0.113.0"))] = "WRONGTYPE Operation against a key";
  }
  const auto rd = reader(conn);
  make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0"});
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("malformed bucket value 'not a bucket'"), std::string::npos)
      << ops[0].error;
  EXPECT_FALSE(ops[1].ok);
  EXPECT_EQ(ops[1].error, "WRONGTYPE Operation against a key");
  EXPECT_TRUE(ops[2].ok) << ops[2].error;
  // The connection stays usable after error replies.
  make_ops({"192.0.2.0"});
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok);
  EXPECT_EQ(redis.connections, 1);
}

TEST_F(WindowReaderTest, AuthWithUserAndPassword) {
  redis.user = "spand";
  redis.password = "s3cret";
  make_ops({"198.51.100.0"});
  {
    RedisConnOptions wrong = conn;
    wrong.auth = RedisAuth{"spand", "nope"};
    const auto rd = reader(wrong);
    rd->read(ptrs.data(), ptrs.size());
    EXPECT_FALSE(ops[0].ok);
    EXPECT_NE(ops[0].error.find("AUTH failed"), std::string::npos) << ops[0].error;
    EXPECT_EQ(ops[0].error.find("nope"), std::string::npos) << "password in the message";
  }
  conn.auth = RedisAuth{"spand", "s3cret"};
  const auto rd = reader(conn);
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok) << ops[0].error;
}

TEST_F(WindowReaderTest, DroppedConnectionFailsTheRestThenReconnects) {
  const auto rd = reader(conn);
  redis.close_after = 2;  // answers two reads of the batch, then hangs up
  make_ops({"198.51.100.0", "203.0.113.0", "192.0.2.0", "192.0.2.128"});
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok);
  EXPECT_TRUE(ops[1].ok);
  EXPECT_FALSE(ops[2].ok);
  EXPECT_FALSE(ops[3].ok);
  EXPECT_NE(ops[2].error.find("redis 127.0.0.1:"), std::string::npos) << ops[2].error;
  redis.close_after = -1;
  make_ops({"198.51.100.0"});
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_TRUE(ops[0].ok) << ops[0].error;
  EXPECT_EQ(rd->reconnects(), 1u);
  EXPECT_EQ(redis.connections, 2);
}

TEST_F(WindowReaderTest, RefusedConnectionFailsFastUntilTheRetryTime) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);  // a port with nobody listening
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const auto rd = reader(conn, RedisEndpoint{"127.0.0.1", ntohs(a.sin_port)});
  make_ops({"198.51.100.0"});
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("refused"), std::string::npos) << ops[0].error;
  const auto t0 = std::chrono::steady_clock::now();
  rd->read(ptrs.data(), ptrs.size());
  EXPECT_FALSE(ops[0].ok);
  EXPECT_NE(ops[0].error.find("refused"), std::string::npos) << ops[0].error;
  // No second connection attempt inside the first backoff (at least half of its 100 ms).
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(ReconnectBackoff::kFirstMs / 2));
  ::close(fd);
}

// The raw pipeline's replies arrive in RedisConn's own buffer, hiredis's in its reader: a raw
// pipeline sent while an appended command's reply is unread would take that reply for its own.
TEST_F(WindowReaderTest, RawPipelineIsRefusedWhileAppendedRepliesAreUnread) {
  RedisConn c;
  std::string error;
  ASSERT_TRUE(c.connect(ep(), conn, error)) << error;
  c.append({"HMGET", "k", "f"});
  EXPECT_FALSE(c.send_raw("*3\r\n$5\r\nHMGET\r\n$1\r\nk\r\n$1\r\nf\r\n", 1, error));
  EXPECT_NE(error.find("unread"), std::string::npos) << error;
  EXPECT_FALSE(c.connected());
  // Alone, the same command goes out and its reply is read from received().
  ASSERT_TRUE(c.connect(ep(), conn, error)) << error;
  ASSERT_TRUE(c.send_raw("*3\r\n$5\r\nHMGET\r\n$1\r\nk\r\n$1\r\nf\r\n", 1, error)) << error;
  while (c.received().size() < 9) ASSERT_TRUE(c.receive_more(error)) << error;
  EXPECT_EQ(c.received(), "*1\r\n$-1\r\n");
  c.consume(c.received().size());
  // And an argv command after it is read by hiredis as usual.
  RedisReply r;
  ASSERT_TRUE(c.command({"HMGET", "k", "f"}, r, error)) << error;
  EXPECT_EQ(r.type, RedisReply::Type::kArray);
  EXPECT_EQ(c.round_trips(), 2u);
}

}  // namespace
}  // namespace spand
