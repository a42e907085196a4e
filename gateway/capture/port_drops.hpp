// Capture loss per port and cause: frames the NIC or the kernel dropped before a worker saw
// them, for /metrics (spand_capture_port_dropped_total{port, cause}). The sources write totals
// about once a second (libpcap pcap_stats, DPDK rte_eth_stats_get) with relaxed atomic stores
// (no lock, no allocation, no system call on the polling thread); the control side reads a
// snapshot. The worker's capture_drops counter keeps the sum for the summary and the progress
// line.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

namespace spand {

enum class CaptureDropCause : uint8_t {
  kImissed,    // DPDK: the NIC had no free receive descriptor (the worker fell behind)
  kRxNombuf,   // DPDK: no mbuf in the pool to receive into
  kKernel,     // libpcap: the kernel's ring was full (ps_drop)
  kInterface,  // libpcap: the interface or its driver dropped (ps_ifdrop)
  kCount
};

// The `cause` label: imissed, rx_nombuf, kernel, interface.
inline const char* capture_drop_cause_name(CaptureDropCause c) {
  switch (c) {
    case CaptureDropCause::kImissed:
      return "imissed";
    case CaptureDropCause::kRxNombuf:
      return "rx_nombuf";
    case CaptureDropCause::kKernel:
      return "kernel";
    case CaptureDropCause::kInterface:
      return "interface";
    case CaptureDropCause::kCount:
      break;
  }
  return "unknown";
}

struct PortDropTotal {
  std::string port;  // a DPDK port's device name, or a libpcap interface
  CaptureDropCause cause;
  uint64_t total;
};

class PortDrops {
 public:
  static constexpr size_t kMaxPorts = 64;
  static constexpr size_t kNone = kMaxPorts;

  // At setup, before the polling starts: the row of `port` with the causes its source reports
  // (each starts at 0, so a scraper sees the series before any loss). The same name gives the
  // same row (a reopened interface); kNone when kMaxPorts ports are registered.
  size_t add_port(const std::string& port, std::initializer_list<CaptureDropCause> causes) {
    std::lock_guard lock(mu_);
    size_t row = 0;
    while (row < count_ && names_[row] != port) ++row;
    if (row == count_) {
      if (count_ == kMaxPorts) return kNone;
      names_[row] = port;
      causes_[row] = 0;
      for (auto& t : totals_[row]) t.store(0, std::memory_order_relaxed);
      ++count_;
    }
    for (CaptureDropCause c : causes) causes_[row] |= uint8_t(1u << unsigned(c));
    return row;
  }
  // A source's total since start for one row and cause (monotonic).
  void set(size_t row, CaptureDropCause c, uint64_t total) {
    if (row < kMaxPorts) totals_[row][size_t(c)].store(total, std::memory_order_relaxed);
  }
  // Every registered (port, cause) with its total, in registration order.
  std::vector<PortDropTotal> snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<PortDropTotal> out;
    for (size_t row = 0; row < count_; ++row) {
      for (size_t c = 0; c < size_t(CaptureDropCause::kCount); ++c) {
        if (causes_[row] & (1u << c))
          out.push_back(
              {names_[row], CaptureDropCause(c), totals_[row][c].load(std::memory_order_relaxed)});
      }
    }
    return out;
  }
  // Forgets every port (tests).
  void clear() {
    std::lock_guard lock(mu_);
    count_ = 0;
  }

 private:
  mutable std::mutex mu_;  // add_port, snapshot, clear: never on the polling path
  size_t count_ = 0;
  std::array<std::string, kMaxPorts> names_;
  std::array<uint8_t, kMaxPorts> causes_{};  // bit i: cause i is reported
  std::array<std::array<std::atomic<uint64_t>, size_t(CaptureDropCause::kCount)>, kMaxPorts>
      totals_{};
};

// The process's table: the sources write it, the gateway's control plane reads it. Header only,
// so that the service's metrics need not link the capture library.
inline PortDrops& port_drops() {
  static PortDrops table;
  return table;
}

}  // namespace spand
