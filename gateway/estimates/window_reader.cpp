#include "estimates/window_reader.hpp"

#include <charconv>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "estimates/reconnect_backoff.hpp"
#include "estimates/redis_conn.hpp"
#include "estimates/redis_schema.hpp"
#include "estimates/resp_window.hpp"

namespace spand {
namespace {

void append_uint(std::string& s, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void append_bulk(std::string& s, std::string_view v) {
  s += '$';
  append_uint(s, v.size());
  s += "\r\n";
  s += v;
  s += "\r\n";
}

class SingleNodeWindowReader final : public WindowReader {
 public:
  explicit SingleNodeWindowReader(const RedisStoreOptions& opts)
      : ep_(opts.endpoint), conn_opts_(opts.conn), window_(opts.window) {}

  void read(WindowRead* const* reads, size_t n) override;
  uint64_t reconnects() const override { return reconnects_; }

 private:
  bool ensure_connected(std::string& error);
  void append_read(const WindowRead& r);

  RedisEndpoint ep_;
  RedisConnOptions conn_opts_;
  WindowOptions window_;
  RedisConn conn_;
  bool connected_once_ = false;
  uint64_t reconnects_ = 0;
  ReconnectBackoff backoff_;
  std::string last_error_;
  std::string out_;                      // the batch's commands, reused
  uint64_t fields_bucket_ = UINT64_MAX;  // bucket whose window fields_ encodes
  std::string fields_;                   // "$len\r\nfield\r\n" per bucket of that window
  size_t nfields_ = 0;
};

bool SingleNodeWindowReader::ensure_connected(std::string& error) {
  if (conn_.connected()) return true;
  const auto now = ReconnectBackoff::Clock::now();
  if (!backoff_.may_try(now)) {
    error = last_error_;
    return false;
  }
  if (!conn_.connect(ep_, conn_opts_, error)) {
    last_error_ = error;
    backoff_.failed(now);
    return false;
  }
  backoff_.succeeded();
  if (connected_once_) ++reconnects_;
  connected_once_ = true;
  return true;
}

void SingleNodeWindowReader::append_read(const WindowRead& r) {
  const uint64_t bucket = bucket_start_of(r.now_ns, window_.bucket_s);
  if (bucket != fields_bucket_) {
    fields_.clear();
    const std::vector<uint64_t> buckets =
        window_buckets(r.now_ns, window_.window_s, window_.bucket_s);
    for (uint64_t b : buckets) append_bulk(fields_, bucket_field(b));
    nfields_ = buckets.size();
    fields_bucket_ = bucket;
  }
  out_ += '*';
  append_uint(out_, 2 + nfields_);
  out_ += "\r\n$5\r\nHMGET\r\n";
  append_bulk(out_, window_key(r.prefix, window_.key_prefix));
  out_ += fields_;
}

void SingleNodeWindowReader::read(WindowRead* const* reads, size_t n) {
  if (n == 0) return;
  std::string error;
  size_t done = 0;
  if (ensure_connected(error)) {
    out_.clear();
    for (size_t i = 0; i < n; ++i) append_read(*reads[i]);
    if (conn_.send_raw(out_, n, error)) {
      while (done < n) {
        WindowRead& r = *reads[done];
        const std::string_view in = conn_.received();
        resp::Reply reply;
        size_t used = 0;
        const resp::Parse s =
            resp::parse_reply(in.data(), in.data() + in.size(), reply, r.acc, used);
        if (s == resp::Parse::kIncomplete) {
          if (!conn_.receive_more(error)) break;
          continue;
        }
        if (s == resp::Parse::kBad) {
          error = "redis " + ep_.to_string() + ": protocol error";
          conn_.close();
          break;
        }
        r.error.clear();
        r.ok = false;
        if (reply.type == resp::Reply::Type::kError) {
          r.error = reply.text;
        } else if (reply.type != resp::Reply::Type::kArray) {
          r.error = "unexpected reply to the window read";
        } else if (reply.bad_value) {
          r.error = "malformed bucket value '" + std::string(reply.bad_text) + "'";
        } else {
          r.ok = true;
        }
        // The reply's text points into the receive buffer: consumed only once copied.
        conn_.consume(used);
        if (!r.ok) r.acc = Accumulator{};
        ++done;
      }
    }
  }
  for (size_t i = done; i < n; ++i) {
    reads[i]->ok = false;
    reads[i]->acc = Accumulator{};
    reads[i]->error = error;
  }
}

class ClusterWindowReader final : public WindowReader {
 public:
  explicit ClusterWindowReader(const RedisStoreOptions& opts) : store_(opts) {}
  void read(WindowRead* const* reads, size_t n) override { store_.read_windows(reads, n); }
  uint64_t reconnects() const override { return store_.reconnects(); }

 private:
  RedisStore store_;
};

}  // namespace

std::unique_ptr<WindowReader> make_window_reader(const RedisStoreOptions& opts) {
  if (opts.cluster_seeds.empty()) return std::make_unique<SingleNodeWindowReader>(opts);
  return std::make_unique<ClusterWindowReader>(opts);
}

}  // namespace spand
