#include "control/config_file.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "exit_status.hpp"

namespace spand {
namespace {

// Options that steer the command line itself: never read from a file, never printed.
bool is_meta(const std::string& name) {
  return name == "help" || name == "config" || name == "print-config" || name == "version";
}

std::string key_of(std::string option_name) {
  std::replace(option_name.begin(), option_name.end(), '-', '_');
  return option_name;
}

std::string option_of(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

bool is_flag(const CLI::Option& o) {
  return o.get_expected_max() == 0;
}
bool is_list(const CLI::Option& o) {
  return o.get_expected_max() > 1;
}
// A value TOML writes bare: the option's type is a number.
bool is_numeric(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  return t.rfind("UINT", 0) == 0 || t.rfind("INT", 0) == 0 || t.rfind("FLOAT", 0) == 0 ||
         t.rfind("NUMBER", 0) == 0;
}

void apply_aliases(std::vector<std::string>& args, const CommandLine& cl) {
  for (std::string& a : args) {
    for (const auto& [old_name, new_name] : cl.aliases) {
      if (a == old_name) {
        a = new_name;
      } else if (a.rfind(old_name + "=", 0) == 0) {
        a = new_name + a.substr(old_name.size());
      }
    }
  }
}

// One TOML scalar as the text an option parses.
bool scalar_text(const toml::node& n, std::string& out) {
  if (auto s = n.value_exact<std::string>()) {
    out = *s;
  } else if (auto i = n.value_exact<int64_t>()) {
    out = std::to_string(*i);
  } else if (auto d = n.value_exact<double>()) {
    std::ostringstream os;
    os.precision(17);
    os << *d;
    out = os.str();
  } else if (auto b = n.value_exact<bool>()) {
    out = *b ? "true" : "false";
  } else {
    return false;
  }
  return true;
}

std::string where(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line);
}

// Reads the file and applies each key to `app` alone. False with `error` on the first problem.
bool apply_file(CLI::App& app, CommandLine& cl, std::string& error) {
  toml::table root;
  try {
    root = toml::parse_file(cl.config_path);
  } catch (const toml::parse_error& e) {
    error = cl.config_path;
    if (e.source().begin.line != 0) error += ":" + std::to_string(e.source().begin.line);
    error += ": " + std::string(e.description());
    return false;
  }
  // toml++ keeps keys sorted; apply them in the file's order (the same key cannot repeat).
  std::vector<std::pair<std::string, const toml::node*>> keys;
  for (const auto& [k, v] : root) keys.emplace_back(std::string(k.str()), &v);
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  for (const auto& [key, node] : keys) {
    const std::string at = where(cl.config_path, *node) + ": " + key;
    std::string name = option_of(key);
    for (const auto& [old_name, new_name] : cl.aliases)
      if ("--" + name == old_name) name = new_name.substr(2);
    CLI::Option* o = is_meta(name) ? nullptr : app.get_option_no_throw("--" + name);
    if (!o || o->get_group().empty()) {
      error = at + ": unknown key (keys are the long options of --help, with '_' for '-')";
      return false;
    }
    std::vector<std::string> values;
    if (node->is_table()) {
      error = at + ": a table; every key is at the top level (no [sections])";
      return false;
    }
    if (const toml::array* arr = node->as_array()) {
      if (!is_list(*o)) {
        error = at + ": expected one value, not an array";
        return false;
      }
      for (const toml::node& e : *arr) {
        std::string v;
        if (!scalar_text(e, v)) {
          error = where(cl.config_path, e) + ": " + key + ": expected strings or numbers";
          return false;
        }
        values.push_back(v);
      }
    } else {
      std::string v;
      if (!scalar_text(*node, v)) {
        error = at + ": expected a string, a number or true/false";
        return false;
      }
      if (is_flag(*o) && !node->is_boolean()) {
        error = at + ": expected true or false";
        return false;
      }
      if (!is_flag(*o) && node->is_boolean()) {
        error = at + ": expected a value, not true/false";
        return false;
      }
      if (is_numeric(*o) && node->is_string()) {
        error = at + ": expected a number, not a string";
        return false;
      }
      if (!is_flag(*o) && !is_numeric(*o) && !node->is_string()) {
        error = at + ": expected a string (in quotes)";
        return false;
      }
      values.push_back(v);
    }
    // "" for an option whose default is "" (no file, no address) leaves it unset: an option
    // with a check (an existing file) would refuse the empty text.
    if (values.size() == 1 && values[0].empty() && !is_list(*o) && o->get_default_str().empty())
      values.clear();
    // The option's own conversion and checks, as if given on the command line.
    try {
      if (!values.empty()) {
        o->clear();
        for (const std::string& v : values) o->add_result(v);
        o->run_callback();
      }
    } catch (const CLI::ParseError& e) {
      error = at + ": " + e.what();
      return false;
    }
    std::erase_if(cl.file_values, [&](const auto& kv) { return kv.first == name; });
    cl.file_values.emplace_back(
        name, node->as_array() || values.size() ? values : std::vector<std::string>{""});
  }
  return true;
}

void toml_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      os << '\\' << c;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      os << buf;
    } else {
      os << c;
    }
  }
  os << '"';
}

// CLI11's text of a list default: "[a,b]" or "".
std::vector<std::string> split_list_default(std::string s) {
  std::vector<std::string> out;
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  for (size_t start = 0; !s.empty() && start <= s.size();) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

void add_config_options(CLI::App& app, CommandLine& cl) {
  app.option_defaults()->always_capture_default();
  app.add_option("--config", cl.config_path,
                 "Read options from this TOML file: one key per long option, '_' for '-' "
                 "(flush_interval_ms = 500); flags override it");
  app.add_flag("--print-config", cl.print_config,
               "Print the effective configuration (defaults, then the file, then flags) as TOML "
               "that --config reads back, and exit");
  app.add_flag("--version", cl.version,
               "Print the version, the git revision and the libraries' versions, and exit");
}

int parse_command_line(CLI::App& app, const char* program, std::vector<std::string> args,
                       CommandLine& cl) {
  auto usage_error = [&](const std::string& msg) {
    std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program, msg.c_str(), program);
    return exit_status::kUsage;
  };
  apply_aliases(args, cl);
  const std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(std::vector<std::string>(reversed));
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  if (cl.version) {
    if (cl.print_version) cl.print_version();
    return exit_status::kOk;
  }
  if (!cl.config_path.empty()) {
    const std::string config_path = cl.config_path;
    const bool print_config = cl.print_config;
    std::string error;
    if (!apply_file(app, cl, error)) return usage_error(error);
    // The flags again, over the file.
    try {
      app.parse(std::vector<std::string>(reversed));
    } catch (const CLI::ParseError& e) {
      return usage_error(e.what());
    }
    cl.config_path = config_path;
    cl.print_config = print_config;
  }
  if (cl.print_config) {
    const std::string text = effective_config_toml(app, cl);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? exit_status::kOk : exit_status::kRuntime;
  }
  return -1;
}

std::string effective_config_toml(const CLI::App& app, const CommandLine& cl) {
  std::ostringstream os;
  os << "# " << app.get_name() << ": effective configuration (defaults, then "
     << (cl.config_path.empty() ? std::string("no file") : cl.config_path)
     << ", then flags). Read back with --config FILE.\n";
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty() || o->get_group().empty()) continue;
    const std::string name = o->get_lnames().front();
    if (is_meta(name)) continue;
    std::vector<std::string> values;
    bool from_file = false;
    if (o->count() > 0) {
      values = o->results();
    } else {
      for (const auto& [k, v] : cl.file_values)
        if (k == name) {
          values = v;
          from_file = true;
        }
      if (!from_file) {
        values = is_list(*o) ? split_list_default(o->get_default_str())
                             : std::vector<std::string>{o->get_default_str()};
      }
    }
    if (!o->get_description().empty()) {
      std::string d = o->get_description();
      std::replace(d.begin(), d.end(), '\n', ' ');
      os << "\n# " << d << "\n";
    }
    const std::string key = key_of(name);
    if (is_flag(*o)) {
      bool on = false;
      for (const std::string& v : values) on = (v == "true" || v == "1" || v == "on" || v == "yes");
      os << key << " = " << (on ? "true" : "false") << "\n";
      continue;
    }
    if (is_list(*o)) {
      os << key << " = [";
      for (size_t i = 0; i < values.size(); ++i) {
        if (i) os << ", ";
        if (is_numeric(*o)) {
          os << values[i];
        } else {
          toml_string(os, values[i]);
        }
      }
      os << "]\n";
      continue;
    }
    const std::string v = values.empty() ? std::string() : values.back();
    if (is_numeric(*o) && !v.empty()) {
      os << key << " = " << v << "\n";
    } else if (is_numeric(*o)) {
      os << "# " << key << " = (none)\n";
    } else {
      os << key << " = ";
      toml_string(os, v);
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace spand
