// Connection setup rate on loopback: N connect()+accept()+close() cycles, one client thread
// and one server thread. Driven by agent_connect_bench.sh, which runs it with spand-agent's
// sock_ops program detached and attached (it reports numbers; it is not a test).
// Usage: agent_connect_bench CONNECTIONS [PORT [CLIENT_SOURCE_IP]]
//        agent_connect_bench --interleave OFF_CGROUP ON_CGROUP ROUNDS BLOCK [PORT]
// The second form alternates three cases block by block inside one process, so that the
// other load of a shared machine falls on all three alike: detached (sockets created in
// OFF_CGROUP, server 127.0.0.2), applied (ON_CGROUP, client 127.0.0.1 has a policy) and no
// match (ON_CGROUP, client 127.0.0.3). A client socket runs the cgroup programs of the cgroup
// its creator was in; an accepted one those of its listener's, so the process moves itself
// between the two cgroups between blocks and keeps one listener per cgroup. Each round runs
// BLOCK connections of every case, in an order rotated per round; it prints one line per
// round and case: "round=R case=C connections=N seconds=S cpu_s=U".
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool join_cgroup(const std::string& dir) {
  FILE* f = std::fopen((dir + "/cgroup.procs").c_str(), "w");
  if (!f) return false;
  bool ok = std::fprintf(f, "%d\n", static_cast<int>(getpid())) > 0;
  return std::fclose(f) == 0 && ok;
}

int listen_on(const char* ip, int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &addr.sin_addr);
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) || listen(ls, 4096)) {
    std::perror("bind/listen");
    std::exit(1);
  }
  // accept() waits at most this long (the socket's receive timeout), so that a lost connection
  // cannot hang the server thread (accept_count); a blocking accept otherwise, as before.
  timeval accept_wait{2, 0};
  setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &accept_wait, sizeof(accept_wait));
  return ls;
}

// Accepts and closes `count` connections; returns how many never came. A connection can be
// lost: when the server thread falls behind by the listen backlog (4096, less than a block of
// 10,000), the kernel drops the handshake's last ACK while the client, whose connect() has
// returned, resets it. Once the client has made all of its connections (`client_done`), an
// accept() that times out means the rest are lost.
long accept_count(int ls, long count, const std::atomic<bool>& client_done) {
  for (long i = 0; i < count;) {
    int c = accept(ls, nullptr, nullptr);
    if (c >= 0) {
      close(c);
      ++i;
    } else if ((errno == EAGAIN || errno == EWOULDBLOCK) && client_done.load()) {
      return count - i;
    }
  }
  return 0;
}

int interleave(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s --interleave OFF_CGROUP ON_CGROUP ROUNDS BLOCK [PORT]\n",
                 argv[0]);
    return 2;
  }
  const std::string cgroups[2] = {argv[2], argv[3]};
  long rounds = std::atol(argv[4]);
  long block = std::atol(argv[5]);
  int port = argc > 6 ? std::atoi(argv[6]) : 18080;
  struct Case {
    const char* name;
    int cgroup;  // index into cgroups
    const char* server_ip;
    const char* client_ip;
    int listener;
  };
  Case cases[3] = {{"detached", 0, "127.0.0.2", "127.0.0.1", -1},
                   {"applied", 1, "127.0.0.1", "127.0.0.1", -1},
                   {"no_match", 1, "127.0.0.1", "127.0.0.3", -1}};
  // Listeners: one per (cgroup, address), created while the process is in that cgroup.
  if (!join_cgroup(cgroups[0])) {
    std::perror(cgroups[0].c_str());
    return 1;
  }
  cases[0].listener = listen_on(cases[0].server_ip, port);
  if (!join_cgroup(cgroups[1])) {
    std::perror(cgroups[1].c_str());
    return 1;
  }
  cases[1].listener = cases[2].listener = listen_on(cases[1].server_ip, port);

  // The server accepts whole blocks in the client's order; `next` hands it the listener (-2:
  // stop).
  std::atomic<int> next{-1};
  std::atomic<long> accepted{0}, lost{0};
  std::atomic<bool> client_done{false};
  std::thread server([&] {
    for (;;) {
      next.wait(-1);
      int ls = next.exchange(-1);
      if (ls == -2) return;
      lost.fetch_add(accept_count(ls, block, client_done));
      accepted.fetch_add(block);
      accepted.notify_one();
    }
  });
  linger lg{1, 0};  // reset instead of close: no TIME_WAIT (see main)
  long failed = 0, expected = 0;
  for (long r = 0; r < rounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      Case& c = cases[(r + k) % 3];
      if (!join_cgroup(cgroups[c.cgroup])) {
        std::perror(cgroups[c.cgroup].c_str());
        return 1;
      }
      sockaddr_in src{}, dst{};
      src.sin_family = dst.sin_family = AF_INET;
      inet_pton(AF_INET, c.client_ip, &src.sin_addr);
      inet_pton(AF_INET, c.server_ip, &dst.sin_addr);
      dst.sin_port = htons(static_cast<uint16_t>(port));
      double cpu0 = cpu_seconds();
      auto t0 = std::chrono::steady_clock::now();
      expected += block;
      client_done.store(false);
      next.store(c.listener);
      next.notify_one();
      for (long i = 0; i < block; ++i) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        bind(s, reinterpret_cast<sockaddr*>(&src), sizeof(src));
        if (connect(s, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) ++failed;
        close(s);
      }
      client_done.store(true);
      for (long a = accepted.load(); a < expected; a = accepted.load()) accepted.wait(a);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("round=%ld case=%s connections=%ld seconds=%.4f cpu_s=%.4f\n", r, c.name, block,
                  secs, cpu_seconds() - cpu0);
    }
  }
  next.store(-2);
  next.notify_one();
  server.join();
  std::fflush(stdout);
  if (failed) std::fprintf(stderr, "%ld connections failed\n", failed);
  if (lost.load())
    std::fprintf(stderr,
                 "%ld connections lost (listen queue overflow); their rounds include a 2 s "
                 "wait\n",
                 lost.load());
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--interleave") == 0) return interleave(argc, argv);
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
  const int ls = listen_on("127.0.0.1", port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::atomic<bool> client_done{false};
  long lost = 0;
  std::thread server([&] { lost = accept_count(ls, n, client_done); });
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
  client_done.store(true);
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
  if (lost)
    std::fprintf(stderr,
                 "%ld connections lost (listen queue overflow); the time includes a 2 s wait\n",
                 lost);
  return failed ? 1 : 0;
}
