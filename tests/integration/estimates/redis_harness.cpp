#include "redis_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace spand::test {

namespace {

bool port_free(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace

uint16_t free_port(bool plus_bus) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    uint16_t port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    // The cluster bus listens on port + 10000, which must exist and be free too.
    if (port == 0 || (plus_bus && (port > 55535 || !port_free(uint16_t(port + 10000))))) continue;
    return port;
  }
  return 0;
}

RedisServer::RedisServer(std::vector<std::string> extra, bool cluster)
    : extra_(std::move(extra)), cluster_(cluster), port_(free_port(cluster)) {
  char tmpl[] = "/tmp/spand-redis-XXXXXX";
  const char* d = mkdtemp(tmpl);
  dir_ = d ? d : "/tmp";
}

RedisServer::~RedisServer() {
  kill9();
  std::error_code ec;
  if (dir_ != "/tmp") std::filesystem::remove_all(dir_, ec);
}

bool RedisServer::start(std::string& error) {
  if (running()) return true;
  std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_),
                                   "--bind",       "127.0.0.1", "--dir",
                                   dir_,           "--save",    "",
                                   "--appendonly", "no",        "--daemonize",
                                   "no",           "--logfile", dir_ + "/redis.log"};
  if (cluster_) {
    for (const char* a :
         {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
          "--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"})
      args.push_back(a);
  }
  args.insert(args.end(), extra_.begin(), extra_.end());
  pid_t pid = fork();
  if (pid < 0) {
    error = "fork failed";
    return false;
  }
  if (pid == 0) {
    // If the test process dies (timeout, crash), the server goes with it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  // Ready when it answers PING (NOAUTH also proves it is serving).
  bool up = poll_until(
      [&] {
        RedisConn c;
        std::string e;
        RedisConnOptions o;
        o.connect_timeout_ms = 100;
        if (!c.connect(endpoint(), o, e)) return false;
        RedisReply r;
        return c.command({"PING"}, r, e) && (r.str == "PONG" || r.error_is("NOAUTH"));
      },
      10'000);
  if (!up) {
    error = "redis-server on port " + std::to_string(port_) +
            " did not answer PING within 10 s (log: " + dir_ + "/redis.log)";
    kill9();
    return false;
  }
  return true;
}

void RedisServer::reap() {
  if (pid_ > 0) {
    int status;
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

void RedisServer::stop() {
  if (pid_ > 0) kill(pid_, SIGTERM);
  reap();
}

void RedisServer::kill9() {
  if (pid_ > 0) kill(pid_, SIGKILL);
  reap();
}

bool RedisServer::connect(RedisConn& c, const RedisAuth& auth) const {
  RedisConnOptions o;
  o.auth = auth;
  o.command_timeout_ms = 5000;
  std::string e;
  return c.connect(endpoint(), o, e);
}

int run_program(const std::vector<std::string>& argv, std::string& output) {
  std::string cmd;
  for (const std::string& a : argv) {
    std::string q = "'";
    for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    cmd += q + "' ";
  }
  cmd += "2>&1 </dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::array<char, 4096> buf;
  size_t n;
  output.clear();
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) output.append(buf.data(), n);
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace spand::test
