// The agent's first step (agents/spand-agent/src/command_line.cpp): flags over the file, the
// answers that end the run (--help, --version, --print-config, errors) and their exit statuses.
#include "command_line.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "exit_codes.hpp"

namespace spand::agent {
namespace {

// getopt_long wants mutable argv; the strings live as long as the Args.
struct Args {
  std::vector<std::string> text;
  std::vector<char*> argv;
  Args(std::initializer_list<const char*> list) {
    text.emplace_back("spand-agent");
    for (const char* s : list) text.emplace_back(s);
    for (auto& s : text) argv.push_back(s.data());
    argv.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(text.size()); }
};

std::optional<int> parse(Args a, CommandLine& out) {
  return parse_command_line(a.argc(), a.argv.data(), out);
}

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/spand-agent-cl-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(CommandLine, RunsWithASourceAndAPort) {
  CommandLine cl;
  EXPECT_EQ(parse({"-f", "/dev/null", "-p", "80:1000", "--once", "--dry-run"}, cl), std::nullopt);
  EXPECT_TRUE(cl.once);
  EXPECT_TRUE(cl.cfg.dry_run);
  ASSERT_EQ(cl.cfg.ports.size(), 1u);
  EXPECT_EQ(cl.cfg.ports[0].port, 80);
  EXPECT_EQ(cl.cfg.ports[0].response_bytes, 1000u);
}

TEST(CommandLine, FlagsWinOverTheFileWhereverTheyStand) {
  const std::string file = write_temp(R"(
[agent]
estimates_file = "e.json"
pace_devices = ["eth0", "eth1"]
[policy]
max_initial_cwnd = 32
[[port]]
port = 443
response_bytes = 50000
)");
  CommandLine cl;
  // The flag before --config still wins: flags are applied after the file is read.
  EXPECT_EQ(parse({"--max-initial-cwnd", "16", "-c", file.c_str(), "--pace-device", "lo"}, cl),
            std::nullopt);
  EXPECT_EQ(cl.cfg.policy.max_initial_cwnd, 16u);
  // --pace-device replaces the file's list rather than adding to it.
  EXPECT_EQ(cl.cfg.pace_devices, std::vector<std::string>{"lo"});
  EXPECT_EQ(cl.cfg.port(443)->response_bytes, 50000u);
  std::remove(file.c_str());
}

TEST(CommandLine, ASecondParseStartsFromTheFirstArgument) {
  CommandLine a, b;
  EXPECT_EQ(parse({"-f", "/dev/null", "-p", "80:1000"}, a), std::nullopt);
  EXPECT_EQ(parse({"-f", "/dev/null", "-p", "81:2000"}, b), std::nullopt);
  ASSERT_EQ(b.cfg.ports.size(), 1u);
  EXPECT_EQ(b.cfg.ports[0].port, 81);
}

TEST(CommandLine, EndsTheRunWithTheDocumentedStatus) {
  struct Case {
    Args args;
    int status;
  };
  const Case cases[] = {
      {{"-f", "/dev/null", "-p", "80:1000", "--max-initial-cwnd", "abc"}, kExitUsage},
      {{"-f", "/dev/null", "-p", "80:1000", "--max-initial-cwnd", "65536"}, kExitUsage},
      {{"-f", "/dev/null", "-p", "80:-5"}, kExitUsage},
      {{"-f", "/dev/null", "-p", "80:1000", "stray"}, kExitUsage},
      {{"-f", "/dev/null", "-p", "80:1000", "--mode", "fast"}, kExitUsage},
      {{"-f", "/dev/null", "-p", "80:1000", "--no-such-flag"}, kExitUsage},
      {{"-p", "80:1000"}, kExitUsage},  // no estimate source (validate())
      {{"-c", "/nonexistent/agent.toml"}, kExitUsage},
      {{"--help"}, kExitOk},
  };
  for (const Case& c : cases) {
    CommandLine cl;
    EXPECT_EQ(parse(c.args, cl), std::optional<int>(c.status)) << c.args.text.back();
    EXPECT_FALSE(cl.version);
  }
}

TEST(CommandLine, VersionAnswersBeforeReadingTheRest) {
  CommandLine cl;
  // The caller prints the versions; what follows --version is not read (as before the split).
  EXPECT_EQ(parse({"--version", "--max-initial-cwnd", "abc"}, cl), std::optional<int>(kExitOk));
  EXPECT_TRUE(cl.version);
}

TEST(CommandLine, PortFlag) {
  struct Case {
    const char* text;
    bool ok;
    uint16_t port;
    uint64_t bytes;
    uint32_t b;
  };
  const Case cases[] = {
      {"80:1000", true, 80, 1000, 1},
      {"0:1:2", true, 0, 1, 2},
      {"65535:1000", true, 65535, 1000, 1},
      {"65536:1000", false, 0, 0, 0},
      {"80:0", false, 0, 0, 0},
      {"80:1000:3", false, 0, 0, 0},
      {"80", false, 0, 0, 0},
      {"80:1000x", false, 0, 0, 0},
      {"80::1", false, 0, 0, 0},
      {"+80:1000", false, 0, 0, 0},
  };
  for (const Case& c : cases) {
    PortConfig pc;
    EXPECT_EQ(parse_port_flag(c.text, pc), c.ok) << c.text;
    if (!c.ok) continue;
    EXPECT_EQ(pc.port, c.port) << c.text;
    EXPECT_EQ(pc.response_bytes, c.bytes) << c.text;
    EXPECT_EQ(pc.acked_per_ack, c.b) << c.text;
  }
}

}  // namespace
}  // namespace spand::agent
