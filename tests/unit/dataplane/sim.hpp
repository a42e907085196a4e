// A tiny scenario driver for tracker tests: one connection between a client and a server, packets
// made as the monitor would see them, fed to a Worker; results read back from its rings.
#pragma once

#include <arpa/inet.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "dataplane/packet.hpp"
#include "dataplane/worker.hpp"

namespace spand::test {

inline IpAddr addr(const std::string& text) {
  uint8_t raw[16];
  if (inet_pton(AF_INET, text.c_str(), raw) == 1) return IpAddr::from_v4(raw);
  inet_pton(AF_INET6, text.c_str(), raw);
  return IpAddr::from_v6(raw);
}

struct Conn {
  explicit Conn(WorkerConfig cfg = small_config()) : w(cfg) {}

  static WorkerConfig small_config() {
    WorkerConfig c;
    c.flow_capacity = 64;
    c.ring_capacity = 1 << 14;
    return c;
  }

  Worker w;
  uint64_t now_ns = 1'700'000'000'000'000'000ull;
  std::string client = "198.51.100.7", server = "203.0.113.10";
  uint16_t cport = 40000, sport = 443;
  uint16_t c_ip_id = 100, s_ip_id = 5000;  // IPv4 IDs: each side increments per datagram
  bool ipv6 = false;

  void wait_us(uint64_t us) { now_ns += us * 1000; }

  ParsedPacket make(bool from_client, uint32_t seq, uint32_t ack, uint8_t flags, uint32_t len = 0) {
    ParsedPacket p;
    p.ts_ns = now_ns;
    p.ip_version = ipv6 ? 6 : 4;
    p.src = addr(from_client ? client : server);
    p.dst = addr(from_client ? server : client);
    p.sport = from_client ? cport : sport;
    p.dport = from_client ? sport : cport;
    p.seq = seq;
    p.ack = ack;
    p.flags = flags;
    p.window = 65535;
    p.payload_len = len;
    if (!ipv6) p.ip_id = from_client ? c_ip_id++ : s_ip_id++;
    return p;
  }
  void feed(const ParsedPacket& p) { w.handle_packet(p); }
  void c(uint32_t seq, uint32_t ack, uint8_t flags, uint32_t len = 0) {
    feed(make(true, seq, ack, flags, len));
  }
  void s(uint32_t seq, uint32_t ack, uint8_t flags, uint32_t len = 0) {
    feed(make(false, seq, ack, flags, len));
  }
  // A pure ACK from the client carrying SACK blocks (at most 4, the option's room).
  void c_sack(uint32_t seq, uint32_t ack, std::initializer_list<SackBlock> blocks) {
    ParsedPacket p = make(true, seq, ack, kAck);
    for (const SackBlock& b : blocks) {
      if (p.opt.sack_count == 4) break;
      p.opt.sack[p.opt.sack_count++] = b;
    }
    feed(p);
  }

  std::vector<FlowRecord> finish() {
    w.finish();
    return records();
  }
  std::vector<FlowRecord> records() {
    std::vector<FlowRecord> out;
    FlowRecord r;
    while (w.flows().pop(r)) out.push_back(r);
    return out;
  }
  std::vector<Sample> samples() {
    std::vector<Sample> out;
    Sample s;
    while (w.samples().pop(s)) out.push_back(s);
    return out;
  }
};

}  // namespace spand::test
