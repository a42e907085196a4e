#include "config.hpp"

#include <gtest/gtest.h>

namespace spand::agent {
namespace {

TEST(Config, TheWrittenConfigurationReadsBackToTheSameValues) {
  // config_to_toml writes every key (the --print-config output); each must be one the reader
  // knows, and read back to the value written. Non-default values, so a key read into the
  // wrong field or not at all shows.
  AgentConfig c;
  c.estimate_server = "10.0.0.1:50051";
  c.policy.share_floor_paced = false;
  c.policy.share_floor_cc = "reno";
  c.policy.share_floor_queued_only = false;
  c.policy.share_floor_rank = false;
  c.policy.share_floor_burst = false;
  c.policy.share_rate_only = true;
  c.policy.standing_queue = false;
  c.policy.share_window_s = 7;
  PortConfig port;
  port.port = 443;
  port.response_bytes = 50000;
  c.ports.push_back(port);
  AgentConfig back;
  auto err = load_config_string(config_to_toml(c), "written.toml", back);
  ASSERT_FALSE(err) << err->message;
  EXPECT_FALSE(back.policy.share_floor_paced);
  EXPECT_EQ(back.policy.share_floor_cc, "reno");
  EXPECT_FALSE(back.policy.share_floor_queued_only);
  EXPECT_FALSE(back.policy.share_floor_rank);
  EXPECT_FALSE(back.policy.share_floor_burst);
  EXPECT_TRUE(back.policy.share_rate_only);
  EXPECT_FALSE(back.policy.standing_queue);
  EXPECT_EQ(back.policy.share_window_s, 7);
  EXPECT_EQ(back.estimate_server, "10.0.0.1:50051");
}

TEST(Config, FullFile) {
  AgentConfig c;
  auto err = load_config_string(R"(
[agent]
estimate_server = "10.0.0.1:50051"
mode = "route"
refresh_interval_ms = 500
prefixes = ["198.51.100.0/24", "2001:db8::/48"]
[policy]
max_initial_cwnd = 32
high_bdp_cc = "cubic"
[[port]]
port = 443
response_bytes = 50000
acked_per_ack = 2
tune = true
[[port]]
port = 0
response_bytes = 10000
)",
                                "t.toml", c);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(c.mode, Mode::kRoute);
  EXPECT_EQ(c.refresh_interval_ms, 500u);
  EXPECT_EQ(c.policy.max_initial_cwnd, 32u);
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.port(443)->acked_per_ack, 2u);
  EXPECT_TRUE(c.port(443)->tune);
  EXPECT_EQ(c.port(8080)->port, 0);  // falls back to the port-0 entry
  EXPECT_EQ(c.static_prefixes.size(), 2u);
  EXPECT_FALSE(validate(c));
}

struct BadCase {
  const char* text;
  const char* where;  // expected "t.toml:LINE:"
  const char* what;
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameTheLine) {
  AgentConfig c;
  auto err = load_config_string(GetParam().text, "t.toml", c);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find(GetParam().where), std::string::npos) << err->message;
  EXPECT_NE(err->message.find(GetParam().what), std::string::npos) << err->message;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, ConfigErrors,
    ::testing::Values(BadCase{"[agent]\nmode = \"fast\"\n", "t.toml:2:", "mode"},
                      BadCase{"[agent]\n\nrefresh_interval_ms = 1\n", "t.toml:3:", "out of range"},
                      BadCase{"[policy]\nmax_initial_cwnd = \"big\"\n", "t.toml:2:", "integer"},
                      BadCase{"[agent]\nunknown = 1\n", "t.toml:2:", "unknown key"},
                      BadCase{"[[port]]\nport = 80\n", "t.toml:1:", "response_bytes"},
                      BadCase{"[agent]\nprefixes = [\"300.1.2.3/24\"]\n", "t.toml:2:", "300.1.2.3"},
                      BadCase{"[agent\n", "t.toml:1:", ""},
                      BadCase{"[agent]\npace_devices = \"eth0\"\n", "t.toml:2:", "array"},
                      BadCase{"[agent]\npace_devices = [\"a-name-too-long-for-linux\"]\n",
                              "t.toml:2:", "1 to 15"},
                      BadCase{"[[port]]\nport = 80\nresponse_bytes = 1\n[[port]]\nport = 80\n"
                              "response_bytes = 2\n",
                              "t.toml:4:", "twice"}));

TEST(Config, ValidateNeedsOneSourceAndPorts) {
  AgentConfig c;
  EXPECT_TRUE(validate(c));
  c.estimates_file = "f";
  EXPECT_TRUE(validate(c));  // no ports
  c.ports.push_back(PortConfig{80, 1000, 1, true, false});
  EXPECT_FALSE(validate(c));
  c.estimate_server = "x:1";
  EXPECT_TRUE(validate(c));  // both
}

}  // namespace
}  // namespace spand::agent

namespace spand::agent {
namespace {

TEST(Config, TcpInfoSampling) {
  AgentConfig c;
  auto err = load_config_string(R"(
[agent]
estimate_server = "10.0.0.1:50051"
sample_tcp_info = true
sample_interval_ms = 100
sample_max_sockets = 4096
[[port]]
port = 443
response_bytes = 50000
)",
                                "t.toml", c);
  ASSERT_FALSE(err) << err->message;
  EXPECT_TRUE(c.sample_tcp_info);
  EXPECT_EQ(c.sample_interval_ms, 100u);
  EXPECT_EQ(c.sample_max_sockets, 4096u);
  EXPECT_FALSE(validate(c));
  // Samples leave through Report: a static estimates file has nowhere to send them.
  c.estimate_server.clear();
  c.estimates_file = "e.json";
  ASSERT_TRUE(validate(c));
  EXPECT_NE(validate(c)->message.find("sample_tcp_info"), std::string::npos);
  AgentConfig d;
  err = load_config_string("[agent]\nsample_interval_ms = 1\n", "t.toml", d);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("t.toml:2:"), std::string::npos);
}

}  // namespace
}  // namespace spand::agent

namespace spand::agent {
namespace {

TEST(Config, PaceDevicesNeedBpfModeAndPacing) {
  AgentConfig c;
  auto err = load_config_string(R"(
[agent]
estimates_file = "e.json"
pace_devices = ["eth0", "eth1"]
[[port]]
port = 443
response_bytes = 50000
)",
                                "t.toml", c);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(c.pace_devices, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_FALSE(validate(c));
  c.mode = Mode::kRoute;  // a route cannot select a pacing class
  ASSERT_TRUE(validate(c));
  EXPECT_NE(validate(c)->message.find("BPF"), std::string::npos);
  c.mode = Mode::kBpf;
  c.policy.pace = false;
  ASSERT_TRUE(validate(c));
  EXPECT_NE(validate(c)->message.find("pace"), std::string::npos);
}

TEST(Config, PinDirDefaultsToTheOldPathAndMustBeAbsolute) {
  AgentConfig c;
  EXPECT_EQ(c.pin_dir, "/sys/fs/bpf/spand");  // the path spand_tune and older agents use
  auto err = load_config_string(R"(
[agent]
estimates_file = "e.json"
pin_dir = "/sys/fs/bpf/spand-web"
[[port]]
port = 443
response_bytes = 50000
)",
                                "t.toml", c);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(c.pin_dir, "/sys/fs/bpf/spand-web");
  EXPECT_FALSE(validate(c));
  for (const char* bad : {"", "/", "spand", "/sys/fs/bpf/spand/"}) {
    c.pin_dir = bad;
    ASSERT_TRUE(validate(c)) << bad;
    EXPECT_NE(validate(c)->message.find("pin_dir"), std::string::npos);
  }
}

}  // namespace
}  // namespace spand::agent
