// libFuzzer target: spand-agent's configuration reader (agents/spand-agent/src/config.cpp): the
// TOML text through toml++ into AgentConfig, then validate() as the agent runs it at start.
// Properties: a bad file is an error with a message naming the file ("fuzz.toml:LINE: ..."),
// never an exception or a crash; a file that loads and validates keeps the bounds the agent
// relies on (prefix lengths, non-zero intervals, one entry per port).
#include <cstdint>
#include <set>
#include <string>

#include "config.hpp"
#include "fuzz_check.hpp"

using namespace spand::agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  AgentConfig cfg;
  const auto err = load_config_string(text, "fuzz.toml", cfg);
  if (err) {
    FUZZ_CHECK(err->message.rfind("fuzz.toml", 0) == 0);
    return 0;
  }
  const auto invalid = validate(cfg);
  if (invalid) {
    FUZZ_CHECK(!invalid->message.empty());
    return 0;
  }
  FUZZ_CHECK(cfg.prefix_len_v4 >= 1 && cfg.prefix_len_v4 <= 32);
  FUZZ_CHECK(cfg.prefix_len_v6 >= 1 && cfg.prefix_len_v6 <= 128);
  FUZZ_CHECK(cfg.refresh_interval_ms > 0);
  std::set<uint16_t> ports;
  for (const PortConfig& p : cfg.ports) FUZZ_CHECK(ports.insert(p.port).second);
  return 0;
}
