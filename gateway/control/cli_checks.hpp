// Option checks the two mains (spand-gateway, spand-estimates) share beyond CLI::Range. CLI11
// puts the option's name before each message ("--max-wc-cv: ..."); both mains exit 2 on them.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace spand {

// A number in [lo, hi]. CLI::Range lets NaN through (every comparison with NaN is false), and
// --max-wc-cv nan switched the outlier rule off without a word.
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
          return "Value " + text + " not a number in " + CLI::detail::to_string(lo) + " to " +
                 CLI::detail::to_string(hi);
        return std::string();
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

// HOST:PORT or [V6]:PORT with a decimal port in 0..65535 (0: any free port), or empty (no
// listener). The listeners
// themselves took 127.0.0.1:99999 as port 34463 (gRPC) or failed with a message naming no option.
inline CLI::Validator listen_address() {
  return CLI::Validator(
      [](std::string& text) {
        if (text.empty()) return std::string();
        const size_t colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0) return "'" + text + "' is not HOST:PORT";
        const std::string port = text.substr(colon + 1);
        if (port.empty() || port.size() > 5 ||
            port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535)
          return "'" + text + "': the port must be 0-65535";
        return std::string();
      },
      "HOST:PORT");
}

// An unsigned decimal or 0x hex 64-bit number with no sign (strtoull reads "-1" as 2^64-1).
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) {
        char* end = nullptr;
        errno = 0;
        std::strtoull(text.c_str(), &end, 0);
        if (text.empty() || text.find('-') != std::string::npos || errno != 0 || *end != '\0')
          return "'" + text + "' is not an unsigned 64-bit number";
        return std::string();
      },
      "UINT64");
}

}  // namespace spand
