// Configuration files for spand-gateway and spand-estimates: TOML (the agent's format), one key
// per command-line option, named as the option with '_' for '-' (`--flush-interval-ms 500` is
// `flush_interval_ms = 500`). Flags override the file; `--print-config` prints the effective
// configuration in the same form, which reads back unchanged. Each key goes through the option's
// own conversion and range checks, so an error names the file, the line and the key.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spand {

struct CommandLine {
  // Set by the caller before add_config_options.
  // Old option names still accepted on the command line and in files (not shown by --help):
  // {old, new}, e.g. {"--cluster", "--redis-cluster"}.
  std::vector<std::pair<std::string, std::string>> aliases;
  // Prints --version's text.
  std::function<void()> print_version;

  // Filled by add_config_options and parse_command_line.
  std::string config_path;
  bool print_config = false;
  bool version = false;
  // The file's keys in file order: option name (no dashes) and the values it gave.
  std::vector<std::pair<std::string, std::vector<std::string>>> file_values;
};

// Adds --config FILE, --print-config and --version to `app`, and makes every option added after
// it keep its default as text (for --print-config). Call before adding the program's options.
void add_config_options(CLI::App& app, CommandLine& cl);

// Parses `args` (the program's arguments without argv[0], in order): the file named by
// --config first, then the flags over it. Returns -1 when the program should go on; otherwise the
// status to exit with: 0 after --help, --version or --print-config (printed on stdout), 2 after
// a usage error (said on stderr as "PROGRAM: FILE:LINE: key: what is wrong" or "PROGRAM: what").
int parse_command_line(CLI::App& app, const char* program, std::vector<std::string> args,
                       CommandLine& cl);

// The effective configuration as TOML (what --print-config prints), from `app` after
// parse_command_line. Exposed for tests.
std::string effective_config_toml(const CLI::App& app, const CommandLine& cl);

}  // namespace spand
