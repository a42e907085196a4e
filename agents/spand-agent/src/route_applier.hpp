// Route mode (no BPF): one route per prefix carrying initcwnd, ssthresh (locked), rtt and
// rttvar metrics, written over rtnetlink. The next hop, device, table and source address are
// copied from the route that serves the prefix now (RTM_GETROUTE), so reachability never
// changes. Our routes carry protocol kRouteProtocol, which is how a restart finds and replaces
// a previous instance's routes.
//
// Deadline: an IPv6 route carries the policy's deadline as its lifetime (RTA_EXPIRES, seconds):
// the kernel stops using it once expired and then deletes it, as the BPF program stops applying
// an expired policy, so an agent killed with SIGKILL leaves nothing applied beyond max_age_s.
// IPv4 routes have no lifetime in Linux (RTA_EXPIRES is ignored for them): they are removed at
// every exit but SIGKILL or a crash, by the next agent's start, and by the systemd unit's
// ExecStopPost (deploy/systemd/spand-agent.service.in), which runs after any exit.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "applier.hpp"
#include "rtnl.hpp"

namespace spand::agent {

// rtm_protocol of spand routes ("proto 245" in `ip route`); 245 is unassigned in
// /etc/iproute2/rt_protos.
inline constexpr unsigned char kRouteProtocol = 245;

// CLOCK_MONOTONIC in seconds: the clock of KernelPolicy::expires_s.
double monotonic_now_s();

class RouteApplier : public KernelApplier {
 public:
  // `now_s`: the clock of KernelPolicy::expires_s.
  explicit RouteApplier(std::function<double()> now_s = monotonic_now_s);
  ~RouteApplier() override;
  const char* name() const override { return "route"; }
  bool per_port() const override { return false; }
  bool start(std::string& error) override;
  bool upsert(const KernelPolicy& policy, std::string& error) override;
  bool remove(const PolicyKey& key, std::string& error) override;
  // IPv6: the route again with the new lifetime. IPv4: nothing to move.
  bool renew(const KernelPolicy& policy, std::string& error) override;
  void stop() override;
  bool active() const override { return rtnl_.is_open(); }
  size_t routes() const { return tables_.size(); }

  // Deletes every route with protocol kRouteProtocol (IPv4 and IPv6). Returns how many.
  int remove_all_ours(std::string& error);

 private:
  std::function<double()> now_s_;
  Rtnl rtnl_;
  std::map<Prefix, uint32_t> tables_;  // installed routes and their table
};

}  // namespace spand::agent
