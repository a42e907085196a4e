// The agent's first step: flags and the configuration file (flags win), checked (validate()),
// with --help, --version and --print-config answered. Touches nothing on the host.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "config.hpp"

namespace spand::agent {

struct CommandLine {
  AgentConfig cfg;
  bool once = false;     // --once: one refresh, then exit
  bool version = false;  // --version: the caller prints the versions (it links the libraries)
};

// Reads argv (getopt_long from the start) and the file `--config` names. Returns the exit status
// when the agent must stop here (an error, already printed; --help; --print-config; --version,
// with `version` set), nothing when it should run.
std::optional<int> parse_command_line(int argc, char** argv, CommandLine& out);

// PORT:BYTES[:B] with the config file's ranges (port 0..65535, response_bytes 1..2^63-1, b 1..2).
bool parse_port_flag(const std::string& s, PortConfig& pc);

void usage(std::FILE* out);

}  // namespace spand::agent
