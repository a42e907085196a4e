// Test server for spand_tune: accepts connections on PORT; each client sends its transfer
// size as decimal text and a newline; the server calls spand_tune(fd, size) before its first
// byte, prints "tune port=<client port> rc=<rc> cwnd=<window>" and sends that many bytes;
// once the client closed (all data acknowledged) it prints the kernel's final
// "done port=<client port> cwnd=<snd_cwnd> ssthresh=<snd_ssthresh> max_pacing=<rate>
// retrans=<segments resent>" from
// TCP_INFO (max_pacing in bytes/s, 18446744073709551615 when unlimited).
// With "notune" as second argument it only sends (a plain server for the non-tune tests).
// Usage: tune_server PORT [notune]
#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spand_socket.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  bool tune = !(argc > 2 && std::string(argv[2]) == "notune");
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[1])));
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) || listen(ls, 16)) {
    std::perror("bind");
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    sockaddr_in peer{};
    socklen_t plen = sizeof(peer);
    int c = accept(ls, reinterpret_cast<sockaddr*>(&peer), &plen);
    if (c < 0) continue;
    std::string line;
    char ch;
    while (read(c, &ch, 1) == 1 && ch != '\n') line += ch;
    uint64_t size = std::strtoull(line.c_str(), nullptr, 10);
    uint32_t cwnd = 0;
    int rc = tune ? spand_tune(c, size, &cwnd) : 0;
    std::printf("tune port=%u rc=%d cwnd=%u\n", ntohs(peer.sin_port), rc, cwnd);
    std::fflush(stdout);
    std::vector<char> buf(size, 'x');
    size_t off = 0;
    while (off < size) {
      ssize_t n = write(c, buf.data() + off, size - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    // The client reads to EOF, then closes: by then every byte is acknowledged.
    shutdown(c, SHUT_WR);
    while (read(c, &ch, 1) > 0) {
    }
    tcp_info ti{};
    socklen_t tlen = sizeof(ti);
    getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &tlen);
    std::printf("done port=%u cwnd=%u ssthresh=%u max_pacing=%llu retrans=%u\n",
                ntohs(peer.sin_port), ti.tcpi_snd_cwnd, ti.tcpi_snd_ssthresh,
                static_cast<unsigned long long>(ti.tcpi_max_pacing_rate), ti.tcpi_total_retrans);
    std::fflush(stdout);
    close(c);
  }
}
