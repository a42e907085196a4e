// libFuzzer target: the text-to-address parsers a client or a Redis reply reaches:
// parse_target and parse_client_address (every Get, BatchGet, Watch and Report address,
// gateway/service/address.cpp), parse_cidr (prefixes read back from Redis, redis_schema.cpp): both
// over the one address/prefix parser (common/net/ip_prefix.cpp);
// parse_endpoint and parse_redis_url (--redis, MOVED/ASK targets, redis_conn.cpp).
// Input: bytes 0-1 pick the store's prefix lengths (IPv4 /1../32, IPv6 /1../128); the rest is
// the text.
// Properties: an accepted target is the configured prefix of its address, with no host bits,
// and reads back from its own text; a client address maps to the same prefix as the target;
// a rejected text has a message; no accepted text holds a NUL (the C parsers would stop there);
// an accepted endpoint has a host and a port in 1..65535.
#include <cstdint>
#include <string>
#include <string_view>

#include "estimates/redis_conn.hpp"
#include "estimates/redis_schema.hpp"
#include "fuzz_check.hpp"
#include "service/address.hpp"

using namespace spand;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  PrefixConfig cfg;
  cfg.v4_len = uint8_t(1 + data[0] % 32);
  cfg.v6_len = uint8_t(1 + data[1] % 128);
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool has_nul = text.find('\0') != std::string_view::npos;

  Prefix target;
  std::string error;
  const bool target_ok = parse_target(text, cfg, target, error);
  FUZZ_CHECK(target_ok || !error.empty());
  if (target_ok) {
    FUZZ_CHECK(!has_nul);
    FUZZ_CHECK(target.len == (target.net.is_v4() ? cfg.v4_len : cfg.v6_len));
    FUZZ_CHECK(prefix_with_len(target.net, target.len) == target);
    Prefix again;
    FUZZ_CHECK(parse_cidr(target.to_string(), again) && again == target);
    std::string e2;
    FUZZ_CHECK(parse_target(target.to_string(), cfg, again, e2) && again == target);
  }

  IpAddr client;
  error.clear();
  const bool client_ok = parse_client_address(text, cfg, client, error);
  FUZZ_CHECK(client_ok || !error.empty());
  if (client_ok) FUZZ_CHECK(target_ok && prefix_of(client, cfg) == target);

  Prefix cidr;
  if (parse_cidr(text, cidr)) {
    FUZZ_CHECK(!has_nul);
    FUZZ_CHECK(prefix_with_len(cidr.net, cidr.len) == cidr);
  }

  RedisEndpoint ep;
  error.clear();
  if (parse_endpoint(text, ep, error)) {
    FUZZ_CHECK(!has_nul);
    FUZZ_CHECK(!ep.host.empty() && ep.port >= 1);
  } else {
    FUZZ_CHECK(!error.empty());
  }
  RedisAuth auth;
  error.clear();
  if (parse_redis_url(text, ep, auth, error)) {
    FUZZ_CHECK(ep.host.find('\0') == std::string::npos);
    FUZZ_CHECK(!ep.host.empty() && ep.port >= 1);
  } else {
    FUZZ_CHECK(!error.empty());
  }
  return 0;
}
