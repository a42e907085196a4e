// The path toward each client prefix, read for the window rule `rounds` every
// path_rate_interval_ms: delivery rate, min RTT and concurrent first windows from the TCP_INFO of
// every connection this host accepted, and the bottleneck rate of first-flight ACK trains that
// the sock_ops program timed (BPF mode). The readings go to PathRates (path_rate.hpp).
#pragma once

#include "agent_core.hpp"
#include "bpf_applier.hpp"
#include "path_rate.hpp"

namespace spand::agent {

// One reading. `bpf` null: no train rates (route mode, dry run).
void read_paths(const AgentCore& core, PathRates& paths, BpfApplier* bpf, Clock& clock);

}  // namespace spand::agent
