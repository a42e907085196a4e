// `spandctl cwnd`: argument parsing by hand (no CLI11 dependency for a dozen options), one
// call into libspand, and a table or JSON on stdout.
#include "spandctl_cwnd.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "exit_status.hpp"
#include "spand.h"

namespace spand {
namespace {

// The shared table (common/exit_status.hpp): values libspand refuses (SPAND_EINVAL,
// SPAND_ERANGE) are bad input, 2 like a value the options refuse.
constexpr int kExitOk = exit_status::kOk;
constexpr int kExitFailed = exit_status::kUsage;
constexpr int kExitUsage = exit_status::kUsage;

constexpr std::string_view kUsage =
    "usage: spandctl cwnd --wc N (--segments F | --bytes B --mss M) [options]\n"
    "\n"
    "Optimal initial congestion window for a transfer (TCP/SPAND, DESIGN.md Eq. 1-4).\n"
    "\n"
    "  --wc N                 W_c, the path's congestion window at loss, segments (>= 1)\n"
    "  --segments F           transfer size in segments\n"
    "  --bytes B              transfer size in bytes (needs --mss); F = ceil(B / M)\n"
    "  --mss M                segment size in bytes\n"
    "  --b B                  segments acknowledged per ACK: 1, or 2 with delayed ACKs (default "
    "1)\n"
    "  --variant V            loss-free (Eq. 3, default) or theorem2 (Eq. 2)\n"
    "  --no-shift             skip the shift optimization (Eq. 4): cwnd_opt = m\n"
    "  --srtt-ms T            also print the pacing rate cwnd_opt * M / T (needs --mss)\n"
    "  --json                 one JSON object instead of the table\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or values the computation refuses (SPAND_ERANGE).\n"
    "Example: spandctl cwnd --wc 10 --segments 11 --b 1   (m = 9, Delta = 4, cwnd_opt = 5)\n";

struct Options {
  std::optional<uint32_t> wc_segments;
  std::optional<uint64_t> transfer_segments;
  std::optional<uint64_t> transfer_bytes;
  std::optional<uint32_t> mss_bytes;
  std::optional<double> srtt_ms;
  uint32_t b = 1;
  int variant = SPAND_LOSS_FREE;
  bool shift = true;
  bool json = false;
  bool help = false;
};

// A usage error: the message for `err`, or empty when parsing succeeded.
using ParseError = std::string;

template <typename T>
ParseError parse_unsigned(std::string_view option, std::string_view text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    return std::string(option) + ": '" + std::string(text) + "' is too large";
  }
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::string(option) + ": '" + std::string(text) + "' is not a non-negative integer";
  }
  return {};
}

ParseError parse_positive_double(std::string_view option, std::string_view text, double& value) {
  const std::string copy(text);
  char* end = nullptr;
  value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value) || value <= 0.0) {
    return std::string(option) + ": '" + copy + "' is not a positive number";
  }
  return {};
}

ParseError parse_args(int argc, char** argv, Options& opt) {
  // argv[0] is the subcommand's own name.
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      opt.help = true;
      continue;
    }
    if (arg == "--no-shift") {
      opt.shift = false;
      continue;
    }
    if (arg == "--json") {
      opt.json = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") return "unexpected argument '" + std::string(arg) + "'";

    // Options with a value: "--name value" or "--name=value".
    std::string_view name = arg;
    std::string_view value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    const bool known = name == "--wc" || name == "--segments" || name == "--bytes" ||
                       name == "--mss" || name == "--b" || name == "--variant" ||
                       name == "--srtt-ms";
    if (!known) return "unknown option '" + std::string(name) + "'";
    if (!has_value) {
      if (i + 1 >= argc) return std::string(name) + " needs a value";
      value = argv[++i];
    }

    ParseError e;
    if (name == "--wc") {
      uint32_t v = 0;
      e = parse_unsigned(name, value, v);
      if (e.empty() && v == 0) e = "--wc must be >= 1 (no window estimate means: use slow start)";
      opt.wc_segments = v;
    } else if (name == "--segments") {
      uint64_t v = 0;
      e = parse_unsigned(name, value, v);
      opt.transfer_segments = v;
    } else if (name == "--bytes") {
      uint64_t v = 0;
      e = parse_unsigned(name, value, v);
      opt.transfer_bytes = v;
    } else if (name == "--mss") {
      uint32_t v = 0;
      e = parse_unsigned(name, value, v);
      if (e.empty() && v == 0) e = "--mss must be >= 1";
      opt.mss_bytes = v;
    } else if (name == "--b") {
      e = parse_unsigned(name, value, opt.b);
      if (e.empty() && opt.b == 0) e = "--b must be >= 1";
    } else if (name == "--variant") {
      if (value == "loss-free") {
        opt.variant = SPAND_LOSS_FREE;
      } else if (value == "theorem2") {
        opt.variant = SPAND_THEOREM2;
      } else {
        e = "--variant: '" + std::string(value) + "' is not loss-free or theorem2";
      }
    } else {
      double v = 0.0;
      e = parse_positive_double(name, value, v);
      opt.srtt_ms = v;
    }
    if (!e.empty()) return e;
  }
  if (opt.help) return {};

  if (!opt.wc_segments) return "--wc is required";
  if (opt.transfer_segments && opt.transfer_bytes) return "give --segments or --bytes, not both";
  if (!opt.transfer_segments && !opt.transfer_bytes) return "--segments or --bytes is required";
  if (opt.transfer_bytes && !opt.mss_bytes) return "--bytes needs --mss";
  if (opt.srtt_ms && !opt.mss_bytes) return "--srtt-ms needs --mss";
  return {};
}

const char* variant_name(int variant) {
  return variant == SPAND_THEOREM2 ? "theorem2" : "loss-free";
}

// Why the answer took an edge-case path, one line each (spand.h, SPAND_CWND_*).
struct FlagText {
  uint32_t bit;
  const char* key;
  const char* text;
};
constexpr FlagText kFlagTexts[] = {
    {SPAND_CWND_WHOLE_EPOCHS, "whole_epochs",
     "F is a multiple of F_E: whole epochs, m = floor((W_c + 1) / 2), no shift"},
    {SPAND_CWND_FALLBACK_THEOREM2, "fallback_theorem2",
     "no loss-free m exists (residual > b * sum 1..W_c): m from Eq. 2"},
    {SPAND_CWND_CAPPED_AT_WC, "capped_at_wc",
     "Eq. 2 gave m = W_c + 1 (residual fits in the loss part): cwnd_opt capped at W_c"},
};

void print_table(std::ostream& out, const Options& opt, uint64_t transfer_segments,
                 const spand_cwnd_result& res, uint64_t rate_bps, uint64_t rate_bytes_per_s) {
  out << "W_c        " << *opt.wc_segments << " segments\n";
  out << "F          " << transfer_segments << " segments";
  if (opt.transfer_bytes) {
    out << " (" << *opt.transfer_bytes << " bytes, MSS " << *opt.mss_bytes << ")";
  }
  out << "\n";
  out << "b          " << opt.b << "\n";
  out << "variant    " << variant_name(opt.variant)
      << (opt.variant == SPAND_THEOREM2 ? " (Eq. 2)" : " (Eq. 3)") << "\n";
  out << "shift      " << (opt.shift ? "on (Eq. 4)" : "off") << "\n";
  out << "F_E        " << res.epoch_segments << " segments (Eq. 1)\n";
  out << "residual   " << res.residual_segments << " segments (F mod F_E)\n";
  out << "m          " << res.m << "\n";
  out << "Delta      " << res.delta << "\n";
  out << "cwnd_opt   " << res.cwnd_opt << " segments\n";
  if (opt.srtt_ms) {
    out << "pacing     " << rate_bps << " bit/s (" << rate_bytes_per_s << " bytes/s), bucket "
        << SPAND_PACING_BUCKET_DEPTH_SEGMENTS << " segments\n";
  }
  for (const FlagText& f : kFlagTexts) {
    if (res.flags & f.bit) out << "note       " << f.text << "\n";
  }
}

void print_json(std::ostream& out, const Options& opt, uint64_t transfer_segments,
                const spand_cwnd_result& res, uint64_t rate_bps, uint64_t rate_bytes_per_s) {
  // Every value is a number, a boolean or one of the fixed names above: nothing to escape.
  out << "{\"wc_segments\":" << *opt.wc_segments << ",\"transfer_segments\":" << transfer_segments;
  if (opt.transfer_bytes) out << ",\"transfer_bytes\":" << *opt.transfer_bytes;
  if (opt.mss_bytes) out << ",\"mss_bytes\":" << *opt.mss_bytes;
  out << ",\"b\":" << opt.b << ",\"variant\":\"" << variant_name(opt.variant) << "\""
      << ",\"shift\":" << (opt.shift ? "true" : "false")
      << ",\"epoch_segments\":" << res.epoch_segments
      << ",\"residual_segments\":" << res.residual_segments << ",\"m\":" << res.m
      << ",\"delta\":" << res.delta << ",\"cwnd_opt\":" << res.cwnd_opt;
  if (opt.srtt_ms) {
    out << ",\"srtt_ms\":" << *opt.srtt_ms << ",\"pacing_rate_bps\":" << rate_bps
        << ",\"pacing_rate_bytes_per_s\":" << rate_bytes_per_s
        << ",\"pacing_bucket_segments\":" << SPAND_PACING_BUCKET_DEPTH_SEGMENTS;
  }
  out << ",\"flags\":[";
  bool first = true;
  for (const FlagText& f : kFlagTexts) {
    if (!(res.flags & f.bit)) continue;
    out << (first ? "" : ",") << "\"" << f.key << "\"";
    first = false;
  }
  out << "]}\n";
}

}  // namespace

int spandctl_cwnd_run(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Options opt;
  if (const ParseError e = parse_args(argc, argv, opt); !e.empty()) {
    err << "spandctl cwnd: " << e << "\nTry 'spandctl cwnd --help'.\n";
    return kExitUsage;
  }
  if (opt.help) {
    out << kUsage;
    return kExitOk;
  }

  const uint64_t transfer_segments =
      opt.transfer_segments ? *opt.transfer_segments
                            : spand_segments_for_bytes(*opt.transfer_bytes, *opt.mss_bytes);
  spand_cwnd_result res{};
  const int rc = spand_cwnd_opt(*opt.wc_segments, transfer_segments, opt.b, opt.variant,
                                opt.shift ? 1 : 0, &res);
  if (rc != SPAND_OK) {
    err << "spandctl cwnd: " << spand_strerror(rc) << "\n";
    return kExitFailed;
  }
  uint64_t rate_bps = 0;
  uint64_t rate_bytes_per_s = 0;
  if (opt.srtt_ms) {
    const double srtt_us = *opt.srtt_ms * 1000.0;
    rate_bps = spand_pacing_rate_bps(res.cwnd_opt, *opt.mss_bytes, srtt_us);
    rate_bytes_per_s = spand_pacing_rate_bytes_per_s(res.cwnd_opt, *opt.mss_bytes, srtt_us);
  }
  if (opt.json) {
    print_json(out, opt, transfer_segments, res, rate_bps, rate_bytes_per_s);
  } else {
    print_table(out, opt, transfer_segments, res, rate_bps, rate_bytes_per_s);
  }
  return kExitOk;
}

int spandctl_cwnd_main(int argc, char** argv) {
  return spandctl_cwnd_run(argc, argv, std::cout, std::cerr);
}

}  // namespace spand
