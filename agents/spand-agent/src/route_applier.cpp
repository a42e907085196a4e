#include "route_applier.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <vector>

namespace spand::agent {

namespace {

struct ServingRoute {
  bool found = false;
  uint8_t dst_len = 0;
  uint32_t table = RT_TABLE_MAIN;
  uint32_t oif = 0;
  bool has_gateway = false;
  std::array<uint8_t, 16> gateway{};
  bool has_prefsrc = false;
  std::array<uint8_t, 16> prefsrc{};
  uint8_t scope = RT_SCOPE_UNIVERSE;
};

const uint8_t* family_addr(const Prefix& p) {
  return p.v4 ? &p.addr[12] : p.addr.data();
}
size_t family_len(const Prefix& p) {
  return p.v4 ? 4 : 16;
}

int parse_getroute(const nlmsghdr* nlh, void* data) {
  auto* out = static_cast<ServingRoute*>(data);
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_get_payload(nlh));
  out->found = true;
  out->dst_len = rtm->rtm_dst_len;
  out->table = rtm->rtm_table;
  out->scope = rtm->rtm_scope;
  auto* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(nlh));
  for (auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(nlh, sizeof(*rtm)));
       mnl_attr_ok(attr, static_cast<int>(tail - reinterpret_cast<const char*>(attr)));
       attr = mnl_attr_next(attr)) {
    size_t len = mnl_attr_get_payload_len(attr);
    switch (mnl_attr_get_type(attr)) {
      case RTA_TABLE:
        out->table = mnl_attr_get_u32(attr);
        break;
      case RTA_OIF:
        out->oif = mnl_attr_get_u32(attr);
        break;
      case RTA_GATEWAY:
        if (len <= 16) {
          out->has_gateway = true;
          std::memcpy(out->gateway.data(), mnl_attr_get_payload(attr), len);
        }
        break;
      case RTA_PREFSRC:
        if (len <= 16) {
          out->has_prefsrc = true;
          std::memcpy(out->prefsrc.data(), mnl_attr_get_payload(attr), len);
        }
        break;
      default:
        break;
    }
  }
  return MNL_CB_OK;
}

struct DumpCtx {
  std::vector<std::vector<char>> ours;  // copies of our routes' messages, to delete
};

int collect_ours(const nlmsghdr* nlh, void* data) {
  auto* ctx = static_cast<DumpCtx*>(data);
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_get_payload(nlh));
  if (rtm->rtm_protocol == kRouteProtocol) {
    const char* b = reinterpret_cast<const char*>(nlh);
    ctx->ours.emplace_back(b, b + nlh->nlmsg_len);
  }
  return MNL_CB_OK;
}

}  // namespace

double monotonic_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

RouteApplier::RouteApplier(std::function<double()> now_s) : now_s_(std::move(now_s)) {}
RouteApplier::~RouteApplier() {
  stop();
}

bool RouteApplier::start(std::string& error) {
  return rtnl_.open(error) && remove_all_ours(error) >= 0;
}

int RouteApplier::remove_all_ours(std::string& error) {
  int removed = 0;
  for (int family : {AF_INET, AF_INET6}) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
    rtm->rtm_family = static_cast<unsigned char>(family);
    DumpCtx ctx;
    const bool listed = rtnl_.query(nlh, collect_ours, &ctx, error);
    for (auto& msg : ctx.ours) {
      auto* del = reinterpret_cast<nlmsghdr*>(msg.data());
      del->nlmsg_type = RTM_DELROUTE;
      del->nlmsg_flags = NLM_F_REQUEST;
      std::string err;
      if (rtnl_.request(del, err)) ++removed;
    }
    if (!listed) {
      error = "route dump: " + error;
      return -1;
    }
  }
  return removed;
}

bool RouteApplier::upsert(const KernelPolicy& p, std::string& error) {
  const Prefix& pre = p.key.prefix;
  int family = pre.v4 ? AF_INET : AF_INET6;

  // 1. Which route serves the prefix now (its first address)?
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_GETROUTE;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = static_cast<unsigned char>(family);
  rtm->rtm_dst_len = pre.v4 ? 32 : 128;
  // The FIB entry that matched (its own prefix length), not a host route built for the reply.
  rtm->rtm_flags = RTM_F_FIB_MATCH;
  mnl_attr_put(nlh, RTA_DST, family_len(pre), family_addr(pre));
  ServingRoute serving;
  std::string err;
  if (!rtnl_.query(nlh, parse_getroute, &serving, err) || !serving.found) {
    error = "no route serves " + pre.str() + ": " + (err.empty() ? "no answer" : err);
    return false;
  }
  bool ours = tables_.count(pre) > 0;
  if (!ours && serving.dst_len >= pre.len_bits) {
    // Replacing a route of the same or a longer prefix would change who serves the prefix
    // (and removing ours would delete it): refuse.
    error = "a route of length /" + std::to_string(serving.dst_len) + " already serves " +
            pre.str() + "; not overriding it";
    return false;
  }

  // 2. Our route: same next hop, device, table, source; with the metrics.
  nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWROUTE;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
  rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = static_cast<unsigned char>(family);
  rtm->rtm_dst_len = pre.len_bits;
  rtm->rtm_table = serving.table < 256 ? static_cast<unsigned char>(serving.table)
                                       : static_cast<unsigned char>(RT_TABLE_UNSPEC);
  rtm->rtm_protocol = kRouteProtocol;
  rtm->rtm_scope = serving.has_gateway ? static_cast<uint8_t>(RT_SCOPE_UNIVERSE) : serving.scope;
  rtm->rtm_type = RTN_UNICAST;
  mnl_attr_put(nlh, RTA_DST, family_len(pre), family_addr(pre));
  mnl_attr_put_u32(nlh, RTA_TABLE, serving.table);
  if (serving.oif) mnl_attr_put_u32(nlh, RTA_OIF, serving.oif);
  if (serving.has_gateway) mnl_attr_put(nlh, RTA_GATEWAY, family_len(pre), serving.gateway.data());
  if (serving.has_prefsrc) mnl_attr_put(nlh, RTA_PREFSRC, family_len(pre), serving.prefsrc.data());
  if (!pre.v4 && p.expires_s > 0) {
    // Whole seconds, rounded up; at least 1 (0 would mean no lifetime). The kernel caps it.
    const double left_s = std::ceil(p.expires_s - now_s_());
    mnl_attr_put_u32(nlh, RTA_EXPIRES,
                     left_s < 1            ? 1u
                     : left_s > 0x7fffffff ? 0x7fffffffu
                                           : uint32_t(left_s));
  }
  nlattr* metrics = mnl_attr_nest_start(nlh, RTA_METRICS);
  mnl_attr_put_u32(nlh, RTAX_INITCWND, p.init_cwnd_segments);
  if (p.skip_slow_start) {
    mnl_attr_put_u32(nlh, RTAX_SSTHRESH,
                     p.ssthresh_segments ? p.ssthresh_segments : p.init_cwnd_segments);
    mnl_attr_put_u32(nlh, RTAX_LOCK, 1u << RTAX_SSTHRESH);
  }
  if (p.srtt_us) {
    // iproute2's units: rtt in ms scaled by 8, rttvar in ms scaled by 4.
    mnl_attr_put_u32(nlh, RTAX_RTT, std::max<uint32_t>(1, p.srtt_us * 8 / 1000));
    mnl_attr_put_u32(nlh, RTAX_RTTVAR, std::max<uint32_t>(1, p.rttvar_us * 4 / 1000));
  }
  mnl_attr_nest_end(nlh, metrics);
  if (!rtnl_.request(nlh, error)) {
    error = "RTM_NEWROUTE " + pre.str() + ": " + error;
    return false;
  }
  tables_[pre] = serving.table;
  return true;
}

bool RouteApplier::renew(const KernelPolicy& policy, std::string& error) {
  if (policy.key.prefix.v4 || tables_.count(policy.key.prefix) == 0) return true;
  return upsert(policy, error);
}

bool RouteApplier::remove(const PolicyKey& key, std::string& error) {
  auto it = tables_.find(key.prefix);
  if (it == tables_.end()) return true;
  const Prefix& pre = key.prefix;
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_DELROUTE;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = pre.v4 ? AF_INET : AF_INET6;
  rtm->rtm_dst_len = pre.len_bits;
  rtm->rtm_protocol = kRouteProtocol;
  rtm->rtm_table = it->second < 256 ? static_cast<unsigned char>(it->second)
                                    : static_cast<unsigned char>(RT_TABLE_UNSPEC);
  rtm->rtm_scope = RT_SCOPE_NOWHERE;
  mnl_attr_put(nlh, RTA_DST, family_len(pre), family_addr(pre));
  mnl_attr_put_u32(nlh, RTA_TABLE, it->second);
  bool ok = rtnl_.request(nlh, error);
  if (ok || errno == ESRCH) tables_.erase(it);
  return ok;
}

void RouteApplier::stop() {
  if (!rtnl_.is_open()) return;
  std::string err;
  for (auto it = tables_.begin(); it != tables_.end();) {
    PolicyKey k{0, it->first};
    ++it;
    remove(k, err);
  }
  remove_all_ours(err);
  rtnl_.close();
}

}  // namespace spand::agent
