// The gRPC shell and the Watch hub, over a real in-process gRPC server on a loopback port with a
// fake store: status codes cross the wire, health and reflection are registered, Watch pushes.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "fakes.hpp"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service/service.hpp"
#include "test_certs.hpp"

namespace spand {
namespace {

using test::FakeAsyncReader;
using test::FakeClock;
using test::FakeSink;
using test::FakeStore;

IpAddr v4(const char* text) {
  uint8_t b[4];
  EXPECT_EQ(inet_pton(AF_INET, text, b), 1);
  return IpAddr::from_v4(b);
}

Accumulator wc_window(uint64_t n, uint32_t wc) {
  Accumulator a;
  a.wc_count = n;
  a.wc_sum = double(n) * wc;
  a.wc_sumsq = double(n) * wc * wc;
  a.newest_ts_ns = 1;
  return a;
}

struct ServiceTest : ::testing::Test {
  ServiceTest() {
    opts.cache_ttl_ms = 0;
    core = std::make_unique<EstimatesCore>(store, clock, opts, &sink);
    hub = std::make_unique<WatchHub>(*core, 50);
    service = std::make_unique<EstimatesService>(*core, *hub, &metrics);
    std::string error;
    server = start_grpc_server("127.0.0.1:0", *service, port, error);
    EXPECT_TRUE(server) << error;
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials());
    stub = v1::Estimates::NewStub(channel);
  }
  ~ServiceTest() override {
    hub->stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    // gRPC's order (as ServiceStack::shutdown): the completion queues shut down and drained
    // while the server object exists, then the server. Left to the members' order, the server
    // went first and a drained request read it after it was freed (SIGSEGV in
    // RegisteredAsyncRequest::FinalizeResult, about one run in ten under --gtest_repeat).
    service.reset();
    server.reset();
  }
  static std::unique_ptr<grpc::ClientContext> ctx_with_deadline(int seconds = 5) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    return ctx;
  }

  FakeStore store;
  FakeClock clock{1'000'000'000};
  FakeSink sink;
  CoreOptions opts;
  Metrics metrics;
  std::unique_ptr<EstimatesCore> core;
  std::unique_ptr<WatchHub> hub;
  std::unique_ptr<EstimatesService> service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Estimates::Stub> stub;
};

TEST_F(ServiceTest, GetAndInvalidArgumentOverTheWire) {
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix), wc_window(6, 20));
  v1::GetRequest req;
  req.set_address("198.51.100.77");
  v1::Estimate out;
  auto ctx = ctx_with_deadline();
  ASSERT_TRUE(stub->Get(ctx.get(), req, &out).ok());
  EXPECT_EQ(out.prefix(), "198.51.100.0/24");
  EXPECT_EQ(out.verdict(), v1::USE_ESTIMATE);
  EXPECT_DOUBLE_EQ(out.wc_segments(), 20.0);

  for (const char* bad : {"garbage", "198.51.100.0/33", "2001:db8::/129"}) {
    req.set_address(bad);
    ctx = ctx_with_deadline();
    const grpc::Status st = stub->Get(ctx.get(), req, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_FALSE(st.error_message().empty());
  }

  v1::BatchGetRequest batch;
  for (size_t i = 0; i <= kMaxBatch; ++i) batch.add_requests()->set_address("10.0.0.1");
  v1::BatchGetResponse bout;
  ctx = ctx_with_deadline();
  EXPECT_EQ(stub->BatchGet(ctx.get(), batch, &bout).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, HealthServiceAnswersServing) {
  // grpc.health.v1.Health/Check for service "" through a generic call: no generated health stub
  // is installed, and an empty HealthCheckRequest serializes to zero bytes.
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty("", 0);
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard lock(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return done; }));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{status: SERVING = 1}: field 1, varint -> 0x08 0x01.
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

// spand_grpc_request_duration_seconds comes from RpcDurations (atomic buckets, no lock per call):
// a call over the wire is counted under its method, buckets are cumulative and end at +Inf, and
// a value lands in the first bucket whose bound is >= it.
TEST_F(ServiceTest, RequestDurationsAreExposed) {
  store.set(prefix_of(v4("198.51.100.1"), opts.prefix), wc_window(6, 20));
  v1::GetRequest req;
  req.set_address("198.51.100.77");
  v1::Estimate out;
  auto ctx = ctx_with_deadline();
  ASSERT_TRUE(stub->Get(ctx.get(), req, &out).ok());

  RpcDurations d;
  d.observe(RpcMethod::kTop, 0.0007);  // le 0.001, not le 0.0005
  d.observe(RpcMethod::kTop, 100);     // past every bound: +Inf only
  auto top = d.Collect();
  ASSERT_EQ(top.size(), 1u);
  const prometheus::ClientMetric* top_metric = nullptr;
  for (const auto& m : top[0].metric) {
    if (m.label.at(0).value == "Top") top_metric = &m;
  }
  ASSERT_NE(top_metric, nullptr);
  const auto& tb = top_metric->histogram.bucket;
  ASSERT_EQ(tb.size(), RpcDurations::kBounds.size() + 1);
  EXPECT_EQ(tb[3].upper_bound, 0.0005);
  EXPECT_EQ(tb[3].cumulative_count, 0u);
  EXPECT_EQ(tb[4].upper_bound, 0.001);
  EXPECT_EQ(tb[4].cumulative_count, 1u);
  EXPECT_EQ(tb[tb.size() - 2].cumulative_count, 1u);
  EXPECT_TRUE(std::isinf(tb.back().upper_bound));
  EXPECT_EQ(tb.back().cumulative_count, 2u);
  EXPECT_EQ(top_metric->histogram.sample_count, 2u);
  EXPECT_NEAR(top_metric->histogram.sample_sum, 100.0007, 1e-6);

  bool found = false;
  for (const auto& c : metrics.collectables()) {
    for (const auto& f : c->Collect()) {
      if (f.name != "spand_grpc_request_duration_seconds") continue;
      EXPECT_EQ(f.type, prometheus::MetricType::Histogram);
      for (const auto& m : f.metric) {
        if (m.label.at(0).value != "Get") continue;
        found = true;
        EXPECT_EQ(m.histogram.sample_count, 1u);
        EXPECT_EQ(m.histogram.bucket.back().cumulative_count, 1u);
        for (size_t i = 1; i < m.histogram.bucket.size(); ++i) {
          EXPECT_GE(m.histogram.bucket[i].cumulative_count,
                    m.histogram.bucket[i - 1].cumulative_count);
        }
      }
    }
  }
  EXPECT_TRUE(found);
}

// The service's own grpc.health.v1 (not gRPC's default one): its two names are SERVING, any
// other is NOT_FOUND, as the health checking protocol says.
TEST_F(ServiceTest, HealthServiceKnowsItsServices) {
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* name : {"", "spand.v1.Estimates", "spand.v1.Nothing"}) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(name);
    grpc::health::v1::HealthCheckResponse out;
    auto ctx = ctx_with_deadline();
    const grpc::Status st = health->Check(ctx.get(), req, &out);
    if (std::string(name) == "spand.v1.Nothing") {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    } else {
      ASSERT_TRUE(st.ok()) << name << ": " << st.error_message();
      EXPECT_EQ(out.status(), grpc::health::v1::HealthCheckResponse::SERVING) << name;
    }
  }
}

TEST_F(ServiceTest, WatchPushesNewConnectionAndUpdates) {
  const Prefix p = prefix_of(v4("198.51.100.1"), opts.prefix);
  store.set(p, wc_window(3, 10));
  v1::WatchRequest req;
  req.add_prefixes("198.51.100.1");
  req.set_initial(true);
  auto ctx = ctx_with_deadline(10);
  auto reader = stub->Watch(ctx.get(), req);
  v1::WatchEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), v1::WatchEvent::INITIAL);
  EXPECT_EQ(ev.estimate().samples(), 3u);

  // Active push: a connection from another prefix is not delivered, one from ours is.
  hub->notify_new_connection(prefix_of(v4("203.0.113.9"), opts.prefix));
  hub->notify_new_connection(p);
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), v1::WatchEvent::NEW_CONNECTION);
  EXPECT_EQ(ev.estimate().prefix(), "198.51.100.0/24");

  // The window changes in the store (a flush): the next refresh pushes it.
  store.set(p, wc_window(7, 12));
  hub->request_refresh();
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), v1::WatchEvent::UPDATED);
  EXPECT_EQ(ev.estimate().samples(), 7u);
  EXPECT_EQ(ev.estimate().verdict(), v1::USE_ESTIMATE);
  ctx->TryCancel();
}

TEST_F(ServiceTest, WatchRejectsBadPrefixes) {
  v1::WatchRequest req;
  auto ctx = ctx_with_deadline();
  auto reader = stub->Watch(ctx.get(), req);
  v1::WatchEvent ev;
  EXPECT_FALSE(reader->Read(&ev));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  req.add_prefixes("10.0.0.0/8");
  ctx = ctx_with_deadline();
  reader = stub->Watch(ctx.get(), req);
  EXPECT_FALSE(reader->Read(&ev));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, ReportStream) {
  auto ctx = ctx_with_deadline();
  v1::ReportSummary summary;
  auto writer = stub->Report(ctx.get(), &summary);
  v1::ReportSample m;
  m.set_client_address("198.51.100.5");
  m.set_wc_segments(9);
  m.set_source("tcp_info");
  ASSERT_TRUE(writer->Write(m));
  m.set_client_address("bad");
  ASSERT_TRUE(writer->Write(m));
  ASSERT_TRUE(writer->WritesDone());
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(summary.accepted(), 1u);
  EXPECT_EQ(summary.rejected(), 1u);
  ASSERT_EQ(sink.samples.size(), 1u);
  EXPECT_EQ(sink.samples[0].origin, SampleOrigin::kAgent);
}

// Calls finished from another thread (the store's reader) and handed back to the polling
// thread(s), many calls at once: every reply arrives, in order for BatchGet, and a failed read
// is UNAVAILABLE on the wire. With one and with two polling threads (completion queues).
struct ServiceAsyncTest : ::testing::TestWithParam<size_t> {};

TEST_P(ServiceAsyncTest, RepliesCompletedByTheReaderThread) {
  FakeStore store;
  FakeClock clock{1'000'000'000};
  CoreOptions opts;
  opts.cache_ttl_ms = 0;
  FakeAsyncReader reader(store);
  EstimatesCore core(store, clock, opts, nullptr, nullptr, &reader);
  WatchHub hub(core, 50);
  Metrics metrics;
  // Declared before the service, so destroyed after it: the server must outlive the draining
  // of the service's completion queues (see ~ServiceTest).
  std::unique_ptr<grpc::Server> server;
  EstimatesService service(core, hub, &metrics, GetParam());
  int port = 0;
  std::string error;
  server = start_grpc_server("127.0.0.1:0", service, port, error);
  ASSERT_TRUE(server) << error;
  auto stub = v1::Estimates::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 8; ++i) {
    store.set(prefix_of(v4(("10.0." + std::to_string(i) + ".1").c_str()), opts.prefix),
              wc_window(uint64_t(i + 1), 10));
  }

  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const int k = (t + i) % 8;
        v1::GetRequest req;
        req.set_address("10.0." + std::to_string(k) + ".9");
        v1::Estimate out;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        if (stub->Get(&ctx, req, &out).ok() &&
            out.prefix() == "10.0." + std::to_string(k) + ".0/24" &&
            out.samples() == uint64_t(k + 1)) {
          ++good;
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(good, 200);
  EXPECT_EQ(reader.completed_off_thread(), 200u);

  v1::BatchGetRequest batch;
  for (int k = 7; k >= 0; --k)
    batch.add_requests()->set_address("10.0." + std::to_string(k) + ".1");
  v1::BatchGetResponse bout;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(stub->BatchGet(&ctx, batch, &bout).ok());
  }
  ASSERT_EQ(bout.estimates_size(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bout.estimates(i).samples(), uint64_t(8 - i));

  reader.fail_prefix(prefix_of(v4("10.0.3.1"), opts.prefix));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetRequest req;
    req.set_address("10.0.3.1");
    v1::Estimate out;
    EXPECT_EQ(stub->Get(&ctx, req, &out).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    EXPECT_EQ(stub->BatchGet(&ctx, batch, &bout).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  hub.stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

INSTANTIATE_TEST_SUITE_P(PollingThreads, ServiceAsyncTest, ::testing::Values(1, 2));

// Security (issue 12, item 5): with a server certificate and a client CA, a client without a
// certificate is refused and one with a certificate signed by the CA gets through; a plaintext
// client gets nothing. With a report token, Report without it is UNAUTHENTICATED.
struct TlsServiceTest : ::testing::Test {
  TlsServiceTest() {
    opts.cache_ttl_ms = 0;
    core = std::make_unique<EstimatesCore>(store, clock, opts, &sink);
    hub = std::make_unique<WatchHub>(*core, 50);
    service = std::make_unique<EstimatesService>(*core, *hub, nullptr);
    GrpcSecurity sec;
    sec.cert_pem = test::kTestServerCertPem;
    sec.key_pem = test::kTestServerKeyPem;
    sec.client_ca_pem = test::kTestCaPem;
    sec.report_token = "s3cret";
    std::string error;
    server = start_grpc_server("127.0.0.1:0", *service, port, error, sec);
    EXPECT_TRUE(server) << error;
  }
  ~TlsServiceTest() override {
    hub->stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    // gRPC's order: shut the completion queues down and drain them while the server object
    // still exists, then destroy it (the reverse crashed 1 run in ~15 with TLS connections).
    service.reset();
    server.reset();
  }
  std::unique_ptr<v1::Estimates::Stub> stub(std::shared_ptr<grpc::ChannelCredentials> creds) {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return v1::Estimates::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), creds, args));
  }
  static std::shared_ptr<grpc::ChannelCredentials> tls(bool with_client_cert) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = test::kTestCaPem;
    if (with_client_cert) {
      o.pem_cert_chain = test::kTestClientCertPem;
      o.pem_private_key = test::kTestClientKeyPem;
    }
    return grpc::SslCredentials(o);
  }
  static grpc::Status get(v1::Estimates::Stub& s) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetRequest req;
    req.set_address("198.51.100.7");
    v1::Estimate out;
    return s.Get(&ctx, req, &out);
  }
  static grpc::Status report(v1::Estimates::Stub& s, const char* token,
                             v1::ReportSummary& summary) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (token) ctx.AddMetadata("authorization", std::string("Bearer ") + token);
    auto w = s.Report(&ctx, &summary);
    v1::ReportSample m;
    m.set_client_address("198.51.100.5");
    m.set_wc_segments(9);
    w->Write(m);
    w->WritesDone();
    return w->Finish();
  }

  FakeStore store;
  FakeClock clock{1'000'000'000};
  FakeSink sink;
  CoreOptions opts;
  std::unique_ptr<EstimatesCore> core;
  std::unique_ptr<WatchHub> hub;
  std::unique_ptr<EstimatesService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

TEST_F(TlsServiceTest, ClientWithoutCertificateIsRefused) {
  EXPECT_EQ(get(*stub(tls(false))).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(get(*stub(grpc::InsecureChannelCredentials())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(get(*stub(tls(true))).ok());
}

TEST_F(TlsServiceTest, ReportNeedsTheBearerToken) {
  auto s = stub(tls(true));
  v1::ReportSummary summary;
  EXPECT_EQ(report(*s, nullptr, summary).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(report(*s, "wrong!", summary).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(sink.samples.empty());
  v1::ReportSummary ok;
  EXPECT_TRUE(report(*s, "s3cret", ok).ok());
  EXPECT_EQ(ok.accepted(), 1u);
  EXPECT_EQ(sink.samples.size(), 1u);
}

TEST(GrpcSecurityOptions, FilesAndPairsAreChecked) {
  GrpcSecurity sec;
  std::string error;
  EXPECT_TRUE(read_grpc_security("", "", "", "", sec, error));
  EXPECT_FALSE(read_grpc_security("/nonexistent.pem", "", "", "", sec, error));
  EXPECT_NE(error.find("go together"), std::string::npos);
  EXPECT_FALSE(read_grpc_security("", "", "/ca.pem", "", sec, error));
  EXPECT_FALSE(read_grpc_security("/nonexistent.pem", "/nonexistent.key", "", "", sec, error));
  EXPECT_NE(error.find("--grpc-tls-cert"), std::string::npos);
  EXPECT_FALSE(read_grpc_security("", "", "", "/nonexistent.token", sec, error));
  EXPECT_NE(error.find("--report-token-file"), std::string::npos);
}

// From files, the server watches them: a client CA replaced on disk applies without a restart
// (here by a CA that did not sign the client's certificate: the client is refused afterwards).
TEST(TlsReload, ClientCaReplacedOnDiskTakesEffect) {
  char dir_tmpl[] = "/tmp/spand-tls-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string dir = dir_tmpl;
  auto write = [&](const std::string& name, const char* text) {
    const std::string tmp = dir + "/" + name + ".new";
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
    ASSERT_EQ(std::rename(tmp.c_str(), (dir + "/" + name).c_str()), 0);  // atomic
  };
  write("cert.pem", test::kTestServerCertPem);
  write("key.pem", test::kTestServerKeyPem);
  write("ca.pem", test::kTestCaPem);
  FakeStore store;
  FakeClock clock{1'000'000'000};
  CoreOptions opts;
  opts.cache_ttl_ms = 0;
  EstimatesCore core(store, clock, opts);
  WatchHub hub(core, 50);
  auto service = std::make_unique<EstimatesService>(core, hub, nullptr);
  GrpcSecurity sec;
  std::string error;
  ASSERT_TRUE(
      read_grpc_security(dir + "/cert.pem", dir + "/key.pem", dir + "/ca.pem", "", sec, error))
      << error;
  sec.reload_s = 1;
  int port = 0;
  auto server = start_grpc_server("127.0.0.1:0", *service, port, error, sec);
  ASSERT_TRUE(server) << error;
  auto call = [&] {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = test::kTestCaPem;
    o.pem_cert_chain = test::kTestClientCertPem;
    o.pem_private_key = test::kTestClientKeyPem;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    auto stub = v1::Estimates::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::SslCredentials(o), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetRequest req;
    req.set_address("198.51.100.7");
    v1::Estimate out;
    return stub->Get(&ctx, req, &out);
  };
  EXPECT_TRUE(call().ok());
  write("ca.pem", test::kTestServerCertPem);  // a "CA" that signed nothing the client has
  bool refused = false;
  for (int i = 0; i < 40 && !refused; ++i) {  // the watcher looks every second
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    refused = !call().ok();
  }
  EXPECT_TRUE(refused);
  hub.stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  service.reset();
  server.reset();
  for (const char* f : {"cert.pem", "key.pem", "ca.pem"}) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace spand
