#include <gtest/gtest.h>

#include "estimates/redis_conn.hpp"
#include "estimates/redis_executor.hpp"

namespace spand {
namespace {

TEST(RedisUrl, Forms) {
  RedisEndpoint ep;
  RedisAuth auth;
  std::string err;
  ASSERT_TRUE(parse_redis_url("redis://127.0.0.1:7000", ep, auth, err)) << err;
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_TRUE(auth.password.empty());

  ASSERT_TRUE(parse_redis_url("redis://:s3cret@localhost", ep, auth, err)) << err;
  EXPECT_EQ(ep.host, "localhost");
  EXPECT_EQ(ep.port, 6379);
  EXPECT_EQ(auth.user, "");
  EXPECT_EQ(auth.password, "s3cret");

  auth = {};
  ASSERT_TRUE(parse_redis_url("redis://gw:p@ss@[::1]:6380/0", ep, auth, err)) << err;
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 6380);
  EXPECT_EQ(auth.user, "gw");
  EXPECT_EQ(auth.password, "p@ss");  // the last '@' separates credentials from the host

  EXPECT_FALSE(parse_redis_url("http://x:1", ep, auth, err));
  EXPECT_FALSE(parse_redis_url("redis://x:0", ep, auth, err));
  EXPECT_FALSE(parse_redis_url("redis://x:70000", ep, auth, err));
  EXPECT_FALSE(parse_redis_url("redis://x:1/3", ep, auth, err));
  EXPECT_FALSE(parse_redis_url("redis://:pw@", ep, auth, err));
}

TEST(RedisReply, ErrorCodes) {
  RedisReply r;
  r.type = RedisReply::Type::kError;
  r.str = "MOVED 3999 127.0.0.1:6381";
  EXPECT_TRUE(r.error_is("MOVED"));
  EXPECT_FALSE(r.error_is("ASK"));
  r.str = "ASKING is fine";
  EXPECT_FALSE(r.error_is("ASK"));
  r.str = "NOSCRIPT No matching script";
  EXPECT_TRUE(r.error_is("NOSCRIPT"));
}

}  // namespace
}  // namespace spand
