// Prints the gateway's per-connection state size for gateway_bench.sh: the flow entry itself and
// the address space the flow table reserves at the default capacity (slots and the flow pool;
// only what is used is committed).
#include <cstdio>

#include "dataplane/worker.hpp"

int main() {
  spand::WorkerConfig cfg;
  spand::Worker w(cfg);
  std::printf("bytes_per_flow %zu\n", spand::Worker::bytes_per_flow());
  std::printf("loss_state_bytes %zu\n", spand::Worker::loss_state_bytes());
  std::printf("table_bytes %zu\n", w.table_bytes());
  std::printf("flow_capacity %u\n", cfg.flow_capacity);
  return 0;
}
