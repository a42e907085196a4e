// Route mode (no BPF): one route per prefix carrying initcwnd, ssthresh (locked), rtt and
// rttvar metrics, written over rtnetlink. The next hop, device, table and source address are
// copied from the route that serves the prefix now (RTM_GETROUTE), so reachability never
// changes. Our routes carry protocol kRouteProtocol, which is how a restart finds and replaces
// a previous instance's routes.
#pragma once

#include <map>
#include <string>

#include "applier.hpp"
#include "rtnl.hpp"

namespace spand::agent {

// rtm_protocol of spand routes ("proto 245" in `ip route`); 245 is unassigned in
// /etc/iproute2/rt_protos.
inline constexpr unsigned char kRouteProtocol = 245;

class RouteApplier : public KernelApplier {
 public:
  RouteApplier();
  ~RouteApplier() override;
  const char* name() const override { return "route"; }
  bool per_port() const override { return false; }
  bool start(std::string& error) override;
  bool upsert(const KernelPolicy& policy, std::string& error) override;
  bool remove(const PolicyKey& key, std::string& error) override;
  void stop() override;
  bool active() const override { return rtnl_.is_open(); }
  size_t routes() const { return tables_.size(); }

  // Deletes every route with protocol kRouteProtocol (IPv4 and IPv6). Returns how many.
  int remove_all_ours(std::string& error);

 private:
  Rtnl rtnl_;
  std::map<Prefix, uint32_t> tables_;  // installed routes and their table
};

}  // namespace spand::agent
