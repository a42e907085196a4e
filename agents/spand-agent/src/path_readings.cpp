#include "path_readings.hpp"

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "tcp_info_dump.hpp"

namespace spand::agent {

void read_paths(const AgentCore& core, PathRates& paths, BpfApplier* bpf, Clock& clock) {
  TcpInfoDump dump;
  std::string dump_err;
  if (dump_tcp_info(dump, dump_err)) {
    const double now = clock.now_s();
    // Connections starting a response: 2 segments or more in flight, the request received
    // less than one round trip ago (their first windows meet at the bottleneck; a
    // connection already past its first round trip has adapted to the path).
    std::map<Prefix, uint32_t> senders;
    for (const TcpInfoSnapshot& s : dump.sockets) {
      if (!dump.listening_ports.count(s.local_port)) continue;  // connections we accepted
      const Prefix key = core.key_prefix(s.remote);
      paths.observe(key, s.delivery_rate_bytes_per_s, s.min_rtt_us, now, s.rtt_us,
                    s.total_retrans > 0);
      const uint64_t round_trip_us = s.min_rtt_us ? s.min_rtt_us : s.rtt_us;
      if (s.unacked_segments >= 2 && uint64_t{s.last_data_recv_ms} * 1000 < round_trip_us)
        ++senders[key];
    }
    for (const auto& [key, n] : senders) paths.observe_senders(key, n, now);
  }
  // The bottleneck rate from first-flight ACK trains (the delivery rate above reads the
  // bottleneck only once a flight reaches the BDP, which short transfers never do).
  if (bpf) {
    const double now = clock.now_s();
    for (const BpfApplier::TrainReading& t : bpf->take_train_rates()) {
      // The program keys a reading by the fixed /24 (/48), or by its policy's prefix when that
      // is longer: the map prefix holding it is the reading's key here.
      const Prefix prefix = core.key_prefix(t.prefix);
      const uint64_t falls = paths.falls();
      paths.observe_train(prefix, t.rate_bytes_per_s, now);
      if (paths.falls() != falls)
        std::fprintf(stderr, "spand-agent: path rate of %s fell to %llu B/s\n",
                     prefix.str().c_str(), static_cast<unsigned long long>(t.rate_bytes_per_s));
      paths.confirm(prefix, t.paced_rate_bytes_per_s, now);
    }
  }
}

}  // namespace spand::agent
