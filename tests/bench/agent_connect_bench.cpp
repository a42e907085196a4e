// Connection setup rate on loopback: N connect()+accept()+close() cycles, one client thread
// and one server thread. Driven by agent_connect_bench.sh, which runs it with spand-agent's
// sock_ops program detached and attached (it reports numbers; it is not a test).
// Usage: agent_connect_bench CONNECTIONS [PORT [CLIENT_SOURCE_IP]]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONNECTIONS [PORT [CLIENT_SOURCE_IP]]\n", argv[0]);
    return 2;
  }
  long n = std::atol(argv[1]);
  int port = argc > 2 ? std::atoi(argv[2]) : 18080;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  if (argc > 3 && inet_pton(AF_INET, argv[3], &src.sin_addr) != 1) {
    std::fprintf(stderr, "bad source address %s\n", argv[3]);
    return 2;
  }
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) || listen(ls, 4096)) {
    std::perror("bind/listen");
    return 1;
  }
  std::thread server([&] {
    for (long i = 0; i < n; ++i) {
      int c = accept(ls, nullptr, nullptr);
      if (c >= 0) close(c);
    }
  });
  // The client resets instead of closing (SO_LINGER 0): no TIME_WAIT, so 100k connections do
  // not run out of ephemeral ports.
  linger lg{1, 0};
  auto t0 = std::chrono::steady_clock::now();
  long failed = 0;
  for (long i = 0; i < n; ++i) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    if (argc > 3) bind(s, reinterpret_cast<sockaddr*>(&src), sizeof(src));
    if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ++failed;
    close(s);
  }
  server.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // CPU time (both threads, user + system, which includes the loopback softirq work done in
  // this process's context): less sensitive than the wall clock to other load on the machine.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::printf("connections=%ld failed=%ld seconds=%.3f rate_per_s=%.0f cpu_us_per_conn=%.3f\n", n,
              failed, secs, static_cast<double>(n) / secs, cpu_s * 1e6 / static_cast<double>(n));
  close(ls);
  return failed ? 1 : 0;
}
