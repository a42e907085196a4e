// StorePool, the estimate service's queue of window reads (control/service_stack.cpp), against a
// small in-process Redis (tests/unit/estimates/fake_redis.hpp): reads queued from many threads are
// all answered, completed on the reader threads and coalesced; after stop() a read is answered at
// once.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "control/service_stack.hpp"
#include "fake_redis.hpp"

namespace spand {
namespace {

using test::FakeRedis;
using test::kNowNs;
using test::now_bucket;
using test::v4_prefix;

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
