#include "tcp_info_report.hpp"

#include <cstdio>
#include <string>

#include "grpc_source.hpp"
#include "tcp_info_dump.hpp"

namespace spand::agent {

void sample_tcp_info(const AgentConfig& cfg, TcpInfoSampler& sampler, TcpReporter& rep,
                     GrpcEstimateSource* grpc) {
  TcpInfoDump dump;
  std::string err;
  if (!dump_tcp_info(dump, err)) {
    // A partial dump would look like ended connections: skip the interval instead.
    std::fprintf(stderr, "spand-agent: tcp_info: %s\n", err.c_str());
    return;
  }
  auto sockets = accepted_sockets(dump, [&](uint16_t port) {
    const PortConfig* pc = cfg.port(port);
    return pc && pc->enabled;
  });
  size_t before = rep.pending.size();
  sampler.on_dump(sockets, rep.pending);
  if (!grpc) {
    static const char* kKind[] = {"rtt_us", "wc_loss_segments", "wc_end_segments"};
    for (size_t i = before; i < rep.pending.size(); ++i)
      std::fprintf(stderr, "spand-agent: dry-run: sample %s=%u client=%s\n",
                   kKind[static_cast<size_t>(rep.pending[i].kind)], rep.pending[i].value,
                   rep.pending[i].remote.addr_str().c_str());
    rep.pending.clear();
    return;
  }
  if (rep.pending.empty()) return;
  std::vector<ReportItem> items;
  items.reserve(rep.pending.size());
  for (const TcpSample& t : rep.pending) {
    ReportItem it;
    it.client_address = t.remote.addr_str();
    if (t.kind == TcpSampleKind::kRtt)
      it.rtt_us = t.value;
    else
      it.wc_segments = t.value;
    it.source = "spand-agent/tcp_info";
    items.push_back(std::move(it));
  }
  if (grpc->report(items)) {
    for (const TcpSample& t : rep.pending) ++rep.sent_by_kind[static_cast<size_t>(t.kind)];
    rep.pending.clear();
  } else if (rep.pending.size() > kMaxPendingTcpSamples) {
    rep.dropped += rep.pending.size();
    rep.pending.clear();
  }
}

}  // namespace spand::agent
