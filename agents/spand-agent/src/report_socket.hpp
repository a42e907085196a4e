// The unix datagram socket for spand_report() (libspand's socket hooks, --report-socket): one
// message per ended connection, turned into Report items for the estimate service.
#pragma once

#include <string>
#include <vector>

#include "estimate.hpp"

namespace spand::agent {

class ReportSocket {
 public:
  ReportSocket() = default;
  ReportSocket(const ReportSocket&) = delete;
  ReportSocket& operator=(const ReportSocket&) = delete;
  ~ReportSocket() { close(); }

  // Binds `path` (replacing a leftover file; mode 0666: any local application may report).
  // false: errno says why.
  bool open(const std::string& path);
  int fd() const { return fd_; }  // -1 when not open
  // Every message waiting, as ReportItems appended to `out` (messages with a wrong magic are
  // skipped).
  void receive(std::vector<ReportItem>& out);
  // Closes the socket and removes its file.
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace spand::agent
