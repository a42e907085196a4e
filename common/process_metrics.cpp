#include "process_metrics.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "spand_version.h"

namespace spand {
namespace {

prometheus::MetricFamily one(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

// Seconds since the epoch at which the system booted (/proc/stat btime).
double boot_time_s() {
  std::ifstream in("/proc/stat");
  std::string key;
  double v = 0;
  while (in >> key) {
    if (key == "btime" && (in >> v)) return v;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

ProcessMetrics::ProcessMetrics(std::string program) : program_(std::move(program)) {}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  {
    prometheus::MetricFamily f;
    f.name = "spand_build_info";
    f.help = "1, labelled with the program, its version and the git revision it was built from";
    f.type = MetricType::Gauge;
    prometheus::ClientMetric m;
    m.label = {{"program", program_}, {"version", SPAND_VERSION}, {"revision", SPAND_GIT_DESCRIBE}};
    m.gauge.value = 1;
    f.metric.push_back(m);
    out.push_back(std::move(f));
  }
  // /proc/self/stat: fields after the command name (which may hold spaces, so after the last
  // ')'): 3 state ... 14 utime 15 stime ... 22 starttime 23 vsize 24 rss (man 5 proc).
  std::ifstream stat_in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    // f[0] is field 3.
    if (f.size() > 22) {
      const double ticks = double(sysconf(_SC_CLK_TCK));
      const double page = double(sysconf(_SC_PAGESIZE));
      const double cpu_s = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      out.push_back(one("process_cpu_seconds_total", "User and system CPU time spent, seconds",
                        MetricType::Counter, cpu_s));
      out.push_back(one("process_start_time_seconds",
                        "Start time of the process since the Unix epoch, seconds",
                        MetricType::Gauge, boot_time_s() + std::stod(f[19]) / ticks));
      out.push_back(one("process_virtual_memory_bytes", "Virtual memory size, bytes",
                        MetricType::Gauge, std::stod(f[20])));
      out.push_back(one("process_resident_memory_bytes", "Resident memory size, bytes",
                        MetricType::Gauge, std::stod(f[21]) * page));
    }
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    double n = 0;
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
    out.push_back(one("process_open_fds", "Open file descriptors", MetricType::Gauge, n - 1));
  }
  std::ifstream limits("/proc/self/limits");
  for (std::string line; std::getline(limits, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    double soft = 0;
    if (std::sscanf(line.c_str() + std::strlen("Max open files"), "%lf", &soft) == 1)
      out.push_back(
          one("process_max_fds", "Limit on open file descriptors", MetricType::Gauge, soft));
  }
  return out;
}

}  // namespace spand
