#include "config.hpp"

#include <toml++/toml.h>

#include <sstream>

namespace spand::agent {

const PortConfig* AgentConfig::port(uint16_t p) const {
  const PortConfig* fallback = nullptr;
  for (const auto& pc : ports) {
    if (pc.port == p) return &pc;
    if (pc.port == 0) fallback = &pc;
  }
  return fallback;
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kAuto:
      return "auto";
    case Mode::kBpf:
      return "bpf";
    case Mode::kRoute:
      return "route";
  }
  return "?";
}

std::optional<Mode> parse_mode(const std::string& s) {
  if (s == "auto") return Mode::kAuto;
  if (s == "bpf") return Mode::kBpf;
  if (s == "route") return Mode::kRoute;
  return std::nullopt;
}

namespace {

std::string where(const std::string& name, const toml::node& n) {
  std::ostringstream os;
  os << name << ":" << n.source().begin.line;
  return os.str();
}

class Reader {
 public:
  Reader(const std::string& name) : name_(name) {}
  std::optional<ConfigError> error;

  void fail(const toml::node& n, const std::string& what) {
    if (!error) error = ConfigError{where(name_, n) + ": " + what};
  }

  template <typename T>
  void integer(const toml::table& t, const char* key, T& out, int64_t lo, int64_t hi) {
    const toml::node* n = t.get(key);
    if (!n) return;
    // The type first: value<int64_t>() of a float converts it (8e35 to int64_t is undefined
    // behaviour; found by tests/fuzz/fuzz_agent_config).
    if (!n->is_integer()) return fail(*n, std::string(key) + ": expected an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      return fail(*n, std::string(key) + ": " + std::to_string(v) + " is out of range [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<T>(v);
  }
  void number(const toml::table& t, const char* key, double& out, double lo, double hi) {
    const toml::node* n = t.get(key);
    if (!n) return;
    auto v = n->value<double>();
    if (!(n->is_integer() || n->is_floating_point()) || !v)
      return fail(*n, std::string(key) + ": expected a number");
    if (!(*v >= lo && *v <= hi)) return fail(*n, std::string(key) + ": out of range");
    out = *v;
  }
  void boolean(const toml::table& t, const char* key, bool& out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    if (!n->is_boolean()) return fail(*n, std::string(key) + ": expected true or false");
    out = *n->value<bool>();
  }
  void string(const toml::table& t, const char* key, std::string& out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    if (!n->is_string()) return fail(*n, std::string(key) + ": expected a string");
    out = *n->value<std::string>();
  }
  void unknown_keys(const toml::table& t, std::initializer_list<const char*> known) {
    for (const auto& [k, v] : t) {
      bool ok = false;
      for (const char* kn : known) ok = ok || k.str() == kn;
      if (!ok) fail(v, "unknown key '" + std::string(k.str()) + "'");
    }
  }

 private:
  std::string name_;
};

std::optional<ConfigError> read_table(const toml::table& root, const std::string& name,
                                      AgentConfig& cfg) {
  Reader r(name);
  r.unknown_keys(root, {"agent", "policy", "port"});
  if (const toml::table* a = root["agent"].as_table()) {
    r.unknown_keys(*a, {"estimate_server",
                        "estimates_file",
                        "mode",
                        "cgroup",
                        "metrics_listen",
                        "report_socket",
                        "pin_dir",
                        "prefix_len_v4",
                        "prefix_len_v6",
                        "prefix_map",
                        "refresh_interval_ms",
                        "grpc_deadline_ms",
                        "kernel_hz",
                        "prefixes",
                        "tune_outgoing",
                        "sample_tcp_info",
                        "sample_interval_ms",
                        "sample_max_sockets",
                        "pace_devices",
                        "scalable",
                        "tls_ca",
                        "tls_cert",
                        "tls_key",
                        "tls_server_name",
                        "report_token_file"});
    r.string(*a, "estimate_server", cfg.estimate_server);
    r.string(*a, "estimates_file", cfg.estimates_file);
    r.string(*a, "tls_ca", cfg.tls_ca);
    r.string(*a, "tls_cert", cfg.tls_cert);
    r.string(*a, "tls_key", cfg.tls_key);
    r.string(*a, "tls_server_name", cfg.tls_server_name);
    r.string(*a, "report_token_file", cfg.report_token_file);
    if (const toml::node* n = a->get("mode")) {
      std::string m;
      r.string(*a, "mode", m);
      if (!r.error) {
        if (auto pm = parse_mode(m))
          cfg.mode = *pm;
        else
          r.fail(*n, "mode: '" + m + "' is not one of bpf, route, auto");
      }
    }
    r.string(*a, "cgroup", cfg.cgroup_path);
    r.string(*a, "metrics_listen", cfg.metrics_listen);
    r.string(*a, "report_socket", cfg.report_socket);
    r.string(*a, "pin_dir", cfg.pin_dir);
    r.string(*a, "prefix_map", cfg.prefix_map);
    r.integer(*a, "prefix_len_v4", cfg.prefix_len_v4, 1, 32);
    r.integer(*a, "prefix_len_v6", cfg.prefix_len_v6, 1, 128);
    r.integer(*a, "refresh_interval_ms", cfg.refresh_interval_ms, 10, 3600000);
    r.integer(*a, "grpc_deadline_ms", cfg.grpc_deadline_ms, 1, 60000);
    r.integer(*a, "kernel_hz", cfg.kernel_hz, 0, 10000);
    r.boolean(*a, "tune_outgoing", cfg.tune_outgoing);
    r.boolean(*a, "sample_tcp_info", cfg.sample_tcp_info);
    r.integer(*a, "sample_interval_ms", cfg.sample_interval_ms, 10, 3600000);
    r.integer(*a, "sample_max_sockets", cfg.sample_max_sockets, 1, 16777216);
    r.boolean(*a, "scalable", cfg.scalable);
    if (const toml::node* n = a->get("prefixes")) {
      const toml::array* arr = n->as_array();
      if (!arr) {
        r.fail(*n, "prefixes: expected an array of strings");
      } else {
        for (const toml::node& e : *arr) {
          auto s = e.value<std::string>();
          auto p = s ? Prefix::parse(*s) : std::nullopt;
          if (!p)
            r.fail(e, "prefixes: '" + (s ? *s : std::string("?")) + "' is not an address or CIDR");
          else
            cfg.static_prefixes.push_back(*p);
        }
      }
    }
    if (const toml::node* n = a->get("pace_devices")) {
      const toml::array* arr = n->as_array();
      if (!arr) {
        r.fail(*n, "pace_devices: expected an array of device names");
      } else {
        for (const toml::node& e : *arr) {
          auto s = e.value<std::string>();
          if (!s || s->empty() || s->size() >= 16)
            r.fail(e, "pace_devices: expected device names (1 to 15 characters)");
          else
            cfg.pace_devices.push_back(*s);
        }
      }
    }
  } else if (const toml::node* n = root.get("agent")) {
    r.fail(*n, "agent: expected a table");
  }
  if (const toml::table* p = root["policy"].as_table()) {
    auto& pc = cfg.policy;
    r.unknown_keys(*p, {"max_initial_cwnd",
                        "min_samples",
                        "max_age_s",
                        "skip_slow_start",
                        "ca_emulate",
                        "pace",
                        "seed_syn_rto",
                        "mss",
                        "high_bdp_cc",
                        "high_bdp_wc_segments",
                        "window_rule",
                        "kernel_initial_cwnd",
                        "share_concurrent",
                        "share_rate_only",
                        "share_floor_paced",
                        "share_floor_cc",
                        "share_floor_queued_only",
                        "share_floor_rank",
                        "share_floor_burst",
                        "standing_queue",
                        "path_rate",
                        "path_rate_interval_ms",
                        "path_rate_window_s",
                        "share_window_s"});
    r.integer(*p, "max_initial_cwnd", pc.max_initial_cwnd, 1, 65535);
    r.integer(*p, "min_samples", pc.min_samples, 0, INT64_MAX);
    r.number(*p, "max_age_s", pc.max_age_s, 0, 86400);
    r.boolean(*p, "skip_slow_start", pc.skip_slow_start);
    r.boolean(*p, "ca_emulate", pc.ca_emulate);
    r.boolean(*p, "pace", pc.pace);
    r.boolean(*p, "seed_syn_rto", pc.seed_syn_rto);
    r.integer(*p, "mss", pc.mss_bytes, 64, 65535);
    r.string(*p, "high_bdp_cc", pc.high_bdp_cc);
    r.integer(*p, "high_bdp_wc_segments", pc.high_bdp_wc_segments, 1, 1000000);
    std::string rule = pc.window_rule == WindowRule::kPaper ? "paper" : "rounds";
    r.string(*p, "window_rule", rule);
    if (rule == "paper") {
      pc.window_rule = WindowRule::kPaper;
    } else if (rule == "rounds") {
      pc.window_rule = WindowRule::kRounds;
    } else if (const toml::node* n = p->get("window_rule")) {
      r.fail(*n, "window_rule: expected \"paper\" or \"rounds\"");
    }
    r.integer(*p, "kernel_initial_cwnd", pc.kernel_initial_cwnd, 1, 65535);
    r.boolean(*p, "path_rate", pc.path_rate);
    r.boolean(*p, "share_concurrent", pc.share_concurrent);
    r.boolean(*p, "share_rate_only", pc.share_rate_only);
    r.boolean(*p, "share_floor_paced", pc.share_floor_paced);
    r.string(*p, "share_floor_cc", pc.share_floor_cc);
    r.boolean(*p, "share_floor_queued_only", pc.share_floor_queued_only);
    r.boolean(*p, "share_floor_rank", pc.share_floor_rank);
    r.boolean(*p, "share_floor_burst", pc.share_floor_burst);
    r.boolean(*p, "standing_queue", pc.standing_queue);
    r.integer(*p, "path_rate_interval_ms", pc.path_rate_interval_ms, 5, 60000);
    r.number(*p, "path_rate_window_s", pc.path_rate_window_s, 1, 86400);
    r.number(*p, "share_window_s", pc.share_window_s, 1, 3600);
  } else if (const toml::node* n = root.get("policy")) {
    r.fail(*n, "policy: expected a table");
  }
  if (const toml::node* n = root.get("port")) {
    const toml::array* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables()) {
      r.fail(*n, "port: expected [[port]] tables");
    } else {
      for (const toml::node& e : *arr) {
        const toml::table& t = *e.as_table();
        PortConfig pc;
        r.unknown_keys(t, {"port", "response_bytes", "acked_per_ack", "enabled", "tune"});
        if (!t.get("port")) r.fail(e, "[[port]] without 'port'");
        r.integer(t, "port", pc.port, 0, 65535);
        r.integer(t, "response_bytes", pc.response_bytes, 1, INT64_MAX);
        r.integer(t, "acked_per_ack", pc.acked_per_ack, 1, 2);
        r.boolean(t, "enabled", pc.enabled);
        r.boolean(t, "tune", pc.tune);
        if (!t.get("response_bytes") && pc.enabled && !r.error)
          r.fail(e, "port " + std::to_string(pc.port) + ": 'response_bytes' is required");
        for (const auto& other : cfg.ports)
          if (other.port == pc.port) r.fail(e, "port " + std::to_string(pc.port) + " twice");
        cfg.ports.push_back(pc);
      }
    }
  }
  return r.error;
}

}  // namespace

std::optional<ConfigError> load_config_string(const std::string& text, const std::string& name,
                                              AgentConfig& cfg) {
  try {
    toml::table root = toml::parse(text, name);
    return read_table(root, name, cfg);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << name << ":" << e.source().begin.line << ": " << e.description();
    return ConfigError{os.str()};
  }
}

std::optional<ConfigError> load_config_file(const std::string& path, AgentConfig& cfg) {
  try {
    toml::table root = toml::parse_file(path);
    cfg.config_path = path;
    return read_table(root, path, cfg);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    if (e.source().begin.line == 0)
      os << path << ": " << e.description();
    else
      os << path << ":" << e.source().begin.line << ": " << e.description();
    return ConfigError{os.str()};
  }
}

std::string config_to_toml(const AgentConfig& cfg) {
  toml::table agent{
      {"estimate_server", cfg.estimate_server},
      {"estimates_file", cfg.estimates_file},
      {"tls_ca", cfg.tls_ca},
      {"tls_cert", cfg.tls_cert},
      {"tls_key", cfg.tls_key},
      {"tls_server_name", cfg.tls_server_name},
      {"report_token_file", cfg.report_token_file},
      {"mode", mode_name(cfg.mode)},
      {"cgroup", cfg.cgroup_path},
      {"metrics_listen", cfg.metrics_listen},
      {"report_socket", cfg.report_socket},
      {"pin_dir", cfg.pin_dir},
      {"prefix_len_v4", int64_t(cfg.prefix_len_v4)},
      {"prefix_len_v6", int64_t(cfg.prefix_len_v6)},
      {"prefix_map", cfg.prefix_map},
      {"refresh_interval_ms", int64_t(cfg.refresh_interval_ms)},
      {"grpc_deadline_ms", int64_t(cfg.grpc_deadline_ms)},
      {"kernel_hz", int64_t(cfg.kernel_hz)},
      {"tune_outgoing", cfg.tune_outgoing},
      {"sample_tcp_info", cfg.sample_tcp_info},
      {"sample_interval_ms", int64_t(cfg.sample_interval_ms)},
      {"sample_max_sockets", int64_t(cfg.sample_max_sockets)},
      {"scalable", cfg.scalable},
  };
  toml::array prefixes, devices;
  for (const Prefix& p : cfg.static_prefixes) prefixes.push_back(p.str());
  for (const std::string& d : cfg.pace_devices) devices.push_back(d);
  agent.insert("prefixes", prefixes);
  agent.insert("pace_devices", devices);
  const PolicyConfig& p = cfg.policy;
  toml::table policy{
      {"max_initial_cwnd", int64_t(p.max_initial_cwnd)},
      {"min_samples", int64_t(p.min_samples)},
      {"max_age_s", p.max_age_s},
      {"skip_slow_start", p.skip_slow_start},
      {"ca_emulate", p.ca_emulate},
      {"pace", p.pace},
      {"seed_syn_rto", p.seed_syn_rto},
      {"mss", int64_t(p.mss_bytes)},
      {"high_bdp_cc", p.high_bdp_cc},
      {"high_bdp_wc_segments", int64_t(p.high_bdp_wc_segments)},
      {"window_rule", p.window_rule == WindowRule::kPaper ? "paper" : "rounds"},
      {"kernel_initial_cwnd", int64_t(p.kernel_initial_cwnd)},
      {"share_concurrent", p.share_concurrent},
      {"share_rate_only", p.share_rate_only},
      {"share_floor_paced", p.share_floor_paced},
      {"share_floor_cc", p.share_floor_cc},
      {"share_floor_queued_only", p.share_floor_queued_only},
      {"share_floor_rank", p.share_floor_rank},
      {"share_floor_burst", p.share_floor_burst},
      {"standing_queue", p.standing_queue},
      {"path_rate", p.path_rate},
      {"path_rate_interval_ms", int64_t(p.path_rate_interval_ms)},
      {"path_rate_window_s", p.path_rate_window_s},
      {"share_window_s", p.share_window_s},
  };
  toml::array ports;
  for (const PortConfig& pc : cfg.ports) {
    ports.push_back(toml::table{{"port", int64_t(pc.port)},
                                {"response_bytes", int64_t(pc.response_bytes)},
                                {"acked_per_ack", int64_t(pc.acked_per_ack)},
                                {"enabled", pc.enabled},
                                {"tune", pc.tune}});
  }
  toml::table root{{"agent", agent}, {"policy", policy}, {"port", ports}};
  std::ostringstream os;
  os << "# spand-agent: effective configuration (the file, then the flags). Read back with "
        "--config FILE.\n"
     << root << "\n";
  return os.str();
}

std::optional<ConfigError> validate(const AgentConfig& cfg) {
  if (cfg.estimate_server.empty() && cfg.estimates_file.empty())
    return ConfigError{
        "no estimate source: set agent.estimate_server or agent.estimates_file "
        "(--server / --estimates-file)"};
  if (!cfg.estimate_server.empty() && !cfg.estimates_file.empty())
    return ConfigError{"set only one of estimate_server and estimates_file"};
  if (cfg.sample_tcp_info && cfg.estimate_server.empty())
    return ConfigError{"sample_tcp_info needs estimate_server: samples go out through Report"};
  if (!cfg.pace_devices.empty() && cfg.mode == Mode::kRoute)
    return ConfigError{"pace_devices needs BPF mode: routes cannot select a pacing class"};
  if (!cfg.pace_devices.empty() && !cfg.policy.pace)
    return ConfigError{"pace_devices is set but policy.pace is false"};
  if (cfg.pin_dir.size() < 2 || cfg.pin_dir[0] != '/' || cfg.pin_dir.back() == '/')
    return ConfigError{"pin_dir '" + cfg.pin_dir +
                       "': expected an absolute directory path without a trailing '/' (on "
                       "bpffs, e.g. /sys/fs/bpf/spand)"};
  if (cfg.ports.empty())
    return ConfigError{"no [[port]] configured: the agent needs a response size per port"};
  return std::nullopt;
}

}  // namespace spand::agent
