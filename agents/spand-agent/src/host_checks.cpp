#include "host_checks.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "exit_codes.hpp"

namespace spand::agent {
namespace {

bool has_cap(int cap) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

std::string find_cgroup2() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string fstype;
    after >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream fields(line);
    std::string id, parent, devno, root, mnt;
    fields >> id >> parent >> devno >> root >> mnt;
    return mnt;
  }
  return "";
}

uint32_t detect_kernel_hz() {
  std::string cmd = "gzip -dc /proc/config.gz 2>/dev/null | grep '^CONFIG_HZ='";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    unsigned hz = 0;
    int n = std::fscanf(p, "CONFIG_HZ=%u", &hz);
    pclose(p);
    if (n == 1 && hz) return hz;
  }
  std::ifstream boot("/boot/config-" + [] {
    std::ifstream r("/proc/sys/kernel/osrelease");
    std::string s;
    r >> s;
    return s;
  }());
  std::string line;
  while (std::getline(boot, line))
    if (line.rfind("CONFIG_HZ=", 0) == 0) return static_cast<uint32_t>(std::stoul(line.substr(10)));
  return 0;
}

}  // namespace

std::optional<int> check_privileges(const AgentConfig& cfg) {
  if (cfg.dry_run) return std::nullopt;
  bool net_admin = has_cap(CAP_NET_ADMIN);
  bool bpf = has_cap(CAP_BPF) || has_cap(CAP_SYS_ADMIN);
  bool need_bpf = cfg.mode != Mode::kRoute;
  if (!net_admin || (cfg.mode == Mode::kBpf && !bpf)) {
    std::fprintf(stderr,
                 "spand-agent: missing privileges: %s mode needs CAP_NET_ADMIN%s (have "
                 "CAP_NET_ADMIN=%s, CAP_BPF=%s). Run as root or grant them (systemd: "
                 "AmbientCapabilities=CAP_NET_ADMIN CAP_BPF CAP_SYS_ADMIN); --dry-run needs "
                 "none.\n",
                 mode_name(cfg.mode), need_bpf ? " and CAP_BPF (or CAP_SYS_ADMIN)" : "",
                 net_admin ? "yes" : "no", bpf ? "yes" : "no");
    return kExitPrivileges;
  }
  return std::nullopt;
}

void complete_from_host(AgentConfig& cfg) {
  if (cfg.cgroup_path.empty()) cfg.cgroup_path = find_cgroup2();
  if (cfg.kernel_hz == 0) cfg.kernel_hz = detect_kernel_hz();
  if (cfg.kernel_hz == 0) {
    // Without HZ the SYN RTO reply (in jiffies) cannot be computed: do not seed it.
    std::fprintf(stderr,
                 "spand-agent: kernel HZ unknown (set agent.kernel_hz); not seeding the SYN RTO\n");
    cfg.policy.seed_syn_rto = false;
  }
}

std::set<std::string> available_congestion_controls() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::set<std::string> out;
  std::string s;
  while (in >> s) out.insert(s);
  return out;
}

}  // namespace spand::agent
