#include "agent/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "core/log.h"

namespace mesh::agent {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

void write_file(const std::filesystem::path& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh directory holding a valid mesh.key (mode 0600).
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("mesh_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_));
    write_file(dir_ / "mesh.key", std::string(kKeyHex) + "\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  AgentConfig parse(const std::string& text) { return parse_config(text, "test.toml", dir_.string()); }

  // The ConfigError message for `text`; fails the test if it parses.
  std::string error_of(const std::string& text) {
    try {
      parse(text);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "parsed without error:\n" << text;
    return {};
  }

  // Asserts an error naming test.toml:LINE:, the key, and a fix.
  std::string expect_error(const std::string& text, int line, const std::string& key) {
    const std::string message = error_of(text);
    EXPECT_THAT(message, HasSubstr("test.toml:" + std::to_string(line) + ":")) << message;
    EXPECT_THAT(message, HasSubstr(key + ":")) << message;
    EXPECT_THAT(message, HasSubstr("Fix:")) << message;
    return message;
  }

  std::filesystem::path dir_;
};

// Enough for interface mode; everything else defaults.
const std::string kMinimal =
    "[link]\n"
    "interfaces = [\"eth0\"]\n"
    "[security]\n"
    "mesh_key_file = \"mesh.key\"\n";

TEST_F(ConfigTest, DefaultsWhenKeysAreAbsent) {
  const AgentConfig config = parse(kMinimal);
  const NodeConfig defaults;
  const AgentConfig agent_defaults;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);

  EXPECT_EQ(config.source, "test.toml");
  EXPECT_EQ(config.node.name, host);
  EXPECT_TRUE(config.node.id.is_unspecified());
  EXPECT_EQ(config.node.location, (std::array<double, 3>{0, 0, 0}));
  EXPECT_EQ(config.node.replay_window, 256u);
  EXPECT_EQ(config.node.transport.default_ttl, 32u);
  EXPECT_EQ(config.node.transport.flood_hold, 30000ms);
  EXPECT_FALSE(config.node.transport.hop_arq.enabled);
  EXPECT_EQ(config.node.transport.hop_arq.max_retransmissions, 3u);
  EXPECT_EQ(config.node.transport.hop_arq.dedupe_hold, 40000ms);
  // RFC 3626 §18's constants.
  EXPECT_EQ(config.node.routing.willingness, 3);
  EXPECT_EQ(config.node.routing.hello_interval, 2000ms);
  EXPECT_EQ(config.node.routing.tc_interval, 5000ms);
  EXPECT_EQ(config.node.routing.mid_interval, 5000ms);
  EXPECT_EQ(config.node.routing.hna_interval, 5000ms);
  EXPECT_EQ(config.node.routing.neighb_hold, 6000ms);
  EXPECT_EQ(config.node.routing.top_hold, 15000ms);
  EXPECT_EQ(config.node.routing.dup_hold, 30000ms);
  EXPECT_EQ(config.node.routing.mid_hold, 15000ms);
  EXPECT_EQ(config.node.routing.hna_hold, 15000ms);
  EXPECT_FALSE(config.node.routing.max_jitter.has_value());
  EXPECT_EQ(config.node.routing.route_recalc_interval, 100ms);
  EXPECT_TRUE(config.node.routing.hna_networks.empty());
  EXPECT_EQ(config.link.olsr_port, 698);
  EXPECT_FALSE(config.kernel_routes.install);
  EXPECT_EQ(config.kernel_routes.protocol, 158);
  EXPECT_EQ(config.node.messaging.retry.first_timeout, 250ms);
  EXPECT_EQ(config.node.messaging.retry.backoff, 2.0);
  EXPECT_EQ(config.node.messaging.retry.max_interval, 2000ms);
  EXPECT_EQ(config.node.messaging.retry.jitter, 0.2);
  EXPECT_EQ(config.node.messaging.retry.deadline, 10000ms);
  EXPECT_EQ(config.node.messaging.dedupe_hold, 60000ms);
  EXPECT_EQ(config.node.messaging.dedupe_capacity, defaults.messaging.dedupe_capacity);
  EXPECT_EQ(config.node.ping_timeout, 5000ms);
  EXPECT_EQ(config.link.mode, LinkConfig::Mode::interface);
  EXPECT_EQ(config.link.interfaces, std::vector<std::string>{"eth0"});
  EXPECT_EQ(config.link.topology_file, "");
  EXPECT_EQ(config.link.agent_port, 6980);
  EXPECT_EQ(config.admin_socket, agent_defaults.admin_socket);
  EXPECT_EQ(config.data_dir, agent_defaults.data_dir);
  EXPECT_EQ(config.mesh_key_file, (dir_ / "mesh.key").string());
  EXPECT_EQ(config.log_level, "info");
  EXPECT_TRUE(config.layer_log_levels.empty());
  EXPECT_EQ(config.node.mesh_key.bytes().size(), 32u);
}

TEST_F(ConfigTest, FullConfigMapsOntoNodeConfig) {
  write_file(dir_ / "topo.txt", "127.0.0.5 127.0.0.6\n");
  const AgentConfig config = parse(R"(
[node]
name = "kitchen-pi"
address = "127.0.0.5"
location = [1.5, -2, 3.25]

[link]
mode = "loopback"
interfaces = ["wlan0", "eth0"]
topology_file = "topo.txt"
agent_port = 7000

[security]
mesh_key_file = "mesh.key"
replay_window = 1024

[routing]
willingness = 7
hello_interval_ms = 1000
tc_interval_ms = 2500
mid_interval_ms = 3000
hna_interval_ms = 4000
neighb_hold_ms = 3000
top_hold_ms = 7500
dup_hold_ms = 20000
mid_hold_ms = 9000
hna_hold_ms = 12000
max_jitter_ms = 100
route_recalc_interval_ms = 0
hna_networks = ["192.168.10.0/24", "10.9.0.0/16"]

[transport]
default_ttl = 16
flood_hold_ms = 25000
hop_arq = true
hop_arq_retransmissions = 5
hop_arq_initial_rto_ms = 50
hop_arq_rto_floor_ms = 4
hop_arq_rto_cap_ms = 500
hop_arq_dedupe_hold_ms = 20000

[requests]
first_timeout_ms = 100
backoff = 1.5
max_interval_ms = 1000
jitter = 0
deadline_ms = 5000
dedupe_hold_ms = 30000

[admin]
socket = "/tmp/agent5.sock"
ping_timeout_ms = 1500

[storage]
data_dir = "state/agent5"

[log]
level = "debug"

[log.layers]
routing = "trace"
agent = "warn"
)");
  EXPECT_EQ(config.node.name, "kitchen-pi");
  EXPECT_EQ(config.node.id, core::Ipv4Address::from_octets(127, 0, 0, 5));
  EXPECT_EQ(config.node.location, (std::array<double, 3>{1.5, -2, 3.25}));
  EXPECT_EQ(config.link.mode, LinkConfig::Mode::loopback);
  EXPECT_EQ(config.link.interfaces, (std::vector<std::string>{"wlan0", "eth0"}));
  EXPECT_EQ(config.link.topology_file, (dir_ / "topo.txt").string());
  EXPECT_EQ(config.link.agent_port, 7000);
  EXPECT_EQ(config.mesh_key_file, (dir_ / "mesh.key").string());
  EXPECT_EQ(config.node.replay_window, 1024u);
  EXPECT_EQ(config.link.olsr_port, 7001);  // loopback: agent_port + 1
  EXPECT_EQ(config.node.transport.default_ttl, 16u);
  EXPECT_EQ(config.node.transport.flood_hold, 25000ms);
  EXPECT_TRUE(config.node.transport.hop_arq.enabled);
  EXPECT_EQ(config.node.transport.hop_arq.max_retransmissions, 5u);
  EXPECT_EQ(config.node.transport.hop_arq.initial_rto, 50ms);
  EXPECT_EQ(config.node.transport.hop_arq.rto_floor, 4ms);
  EXPECT_EQ(config.node.transport.hop_arq.rto_cap, 500ms);
  EXPECT_EQ(config.node.transport.hop_arq.dedupe_hold, 20000ms);
  EXPECT_EQ(config.node.routing.willingness, 7);
  EXPECT_EQ(config.node.routing.hello_interval, 1000ms);
  EXPECT_EQ(config.node.routing.tc_interval, 2500ms);
  EXPECT_EQ(config.node.routing.mid_interval, 3000ms);
  EXPECT_EQ(config.node.routing.hna_interval, 4000ms);
  EXPECT_EQ(config.node.routing.neighb_hold, 3000ms);
  EXPECT_EQ(config.node.routing.top_hold, 7500ms);
  EXPECT_EQ(config.node.routing.dup_hold, 20000ms);
  EXPECT_EQ(config.node.routing.mid_hold, 9000ms);
  EXPECT_EQ(config.node.routing.hna_hold, 12000ms);
  EXPECT_EQ(config.node.routing.max_jitter, std::optional<core::Duration>(100ms));
  EXPECT_EQ(config.node.routing.route_recalc_interval, 0ms);
  ASSERT_EQ(config.node.routing.hna_networks.size(), 2u);
  EXPECT_EQ(config.node.routing.hna_networks[0].network, core::Ipv4Address::from_octets(192, 168, 10, 0));
  EXPECT_EQ(config.node.routing.hna_networks[0].netmask, core::Ipv4Address::from_octets(255, 255, 255, 0));
  EXPECT_EQ(config.node.routing.hna_networks[1].netmask, core::Ipv4Address::from_octets(255, 255, 0, 0));
  EXPECT_EQ(config.node.messaging.retry.first_timeout, 100ms);
  EXPECT_EQ(config.node.messaging.retry.backoff, 1.5);
  EXPECT_EQ(config.node.messaging.retry.max_interval, 1000ms);
  EXPECT_EQ(config.node.messaging.retry.jitter, 0.0);
  EXPECT_EQ(config.node.messaging.retry.deadline, 5000ms);
  EXPECT_EQ(config.node.messaging.dedupe_hold, 30000ms);
  EXPECT_EQ(config.admin_socket, "/tmp/agent5.sock");
  EXPECT_EQ(config.node.ping_timeout, 1500ms);
  EXPECT_EQ(config.data_dir, (dir_ / "state/agent5").string());
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.layer_log_levels, (std::map<std::string, std::string>{{"agent", "warn"}, {"routing", "trace"}}));

  const auto& key = config.node.mesh_key.bytes();
  ASSERT_EQ(key.size(), 32u);
  EXPECT_EQ(key[0], 0x00);
  EXPECT_EQ(key[1], 0x11);
  EXPECT_EQ(key[15], 0xff);
  EXPECT_EQ(key[31], 0xff);
}

TEST_F(ConfigTest, LoadConfigResolvesPathsAgainstTheConfigDirectory) {
  const auto sub = dir_ / "etc";
  std::filesystem::create_directories(sub);
  write_file(sub / "my.key", std::string(kKeyHex));
  write_file(
      sub / "agent.toml",
      "[link]\ninterfaces = [\"wlan0\"]\n[security]\nmesh_key_file = \"my.key\"\n[storage]\ndata_dir = \"data\"\n");
  const AgentConfig config = load_config((sub / "agent.toml").string());
  EXPECT_EQ(config.source, (sub / "agent.toml").string());
  EXPECT_EQ(config.mesh_key_file, (sub / "my.key").string());
  EXPECT_EQ(config.data_dir, (sub / "data").string());

  try {
    load_config((dir_ / "missing.toml").string());
    ADD_FAILURE() << "a missing config file loaded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "missing.toml").string()));
  }
}

TEST_F(ConfigTest, ErrorsInLoadedFileNameThePath) {
  write_file(dir_ / "agent.toml", "[link]\ninterfaces = [\"wlan0\"]\nmode = \"wifi\"\n");
  try {
    load_config((dir_ / "agent.toml").string());
    ADD_FAILURE() << "an invalid config loaded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "agent.toml").string() + ":3: link.mode: expected \"interface\" or "
                                                                     "\"loopback\", got \"wifi\". Fix: set mode = "
                                                                     "\"interface\""));
  }
}

TEST_F(ConfigTest, UnknownKeySuggestsTheClosest) {
  const auto message = expect_error(kMinimal + "[routing]\nhello_intreval_ms = 500\n", 6, "routing.hello_intreval_ms");
  EXPECT_THAT(message, HasSubstr("did you mean \"hello_interval_ms\"?"));
}

TEST_F(ConfigTest, UnknownKeyWithoutCloseMatchListsTheAccepted) {
  const auto message = expect_error(kMinimal + "[storage]\ncolour = \"blue\"\n", 6, "storage.colour");
  EXPECT_THAT(message, HasSubstr("unknown key"));
  EXPECT_THAT(message, HasSubstr("data_dir"));
  EXPECT_THAT(message, Not(HasSubstr("did you mean")));
}

TEST_F(ConfigTest, KeyInTheWrongTableNamesItsTable) {
  const auto message = expect_error(kMinimal + "[node]\nagent_port = 7000\n", 6, "node.agent_port");
  EXPECT_THAT(message, HasSubstr("link.agent_port"));
}

TEST_F(ConfigTest, TopLevelKeyNamesItsTable) {
  const auto message = expect_error("name = \"x\"\n" + kMinimal, 1, "name");
  EXPECT_THAT(message, HasSubstr("node.name"));
}

TEST_F(ConfigTest, UnknownTableSuggestsTheClosest) {
  const auto message = expect_error(kMinimal + "\n[transprot]\ndefault_ttl = 5\n", 6, "transprot");
  EXPECT_THAT(message, HasSubstr("unknown table [transprot]; did you mean [transport]?"));
}

TEST_F(ConfigTest, UnknownTableWithoutCloseMatch) {
  const auto message = expect_error(kMinimal + "[zigbee]\nchannel = 11\n", 5, "zigbee");
  EXPECT_THAT(message, HasSubstr("unknown table [zigbee]"));
  EXPECT_THAT(message, HasSubstr("[node]"));
}

TEST_F(ConfigTest, KnownTableOfWrongType) { expect_error("node = 3\n" + kMinimal, 1, "node"); }

TEST_F(ConfigTest, WrongTypes) {
  auto message = expect_error(kMinimal + "[transport]\ndefault_ttl = \"32\"\n", 6, "transport.default_ttl");
  EXPECT_THAT(message, HasSubstr("expected an integer, got a string (\"32\")"));
  message = expect_error(kMinimal + "[requests]\nbackoff = \"fast\"\n", 6, "requests.backoff");
  EXPECT_THAT(message, HasSubstr("expected a number"));
  message = expect_error("[node]\nname = 7\n" + kMinimal, 2, "node.name");
  EXPECT_THAT(message, HasSubstr("expected a string, got an integer (7)"));
  expect_error(kMinimal + "[admin]\nsocket = true\n", 6, "admin.socket");
  expect_error("[link]\ninterfaces = \"wlan0\"\n[security]\nmesh_key_file = \"mesh.key\"\n", 2, "link.interfaces");
  expect_error("[link]\ninterfaces = [\"wlan0\", 5]\n[security]\nmesh_key_file = \"mesh.key\"\n", 2, "link.interfaces");
  expect_error("[node]\nlocation = \"here\"\n" + kMinimal, 2, "node.location");
  expect_error("[node]\nlocation = [1, \"2\", 3]\n" + kMinimal, 2, "node.location");
  expect_error(kMinimal + "[log]\nlevel = 3\n", 6, "log.level");
  expect_error(kMinimal + "[log]\nlayers = 3\n", 6, "log.layers");
  expect_error(kMinimal + "[log.layers]\nrouting = 3\n", 6, "log.layers.routing");
}

TEST_F(ConfigTest, OutOfRange) {
  auto message =
      expect_error("[link]\ninterfaces = [\"eth0\"]\nagent_port = 70000\n[security]\nmesh_key_file = \"mesh.key\"\n", 3,
                   "link.agent_port");
  EXPECT_THAT(message, HasSubstr("70000 is out of range 1..65535"));
  expect_error("[link]\ninterfaces = [\"eth0\"]\nagent_port = 0\n[security]\nmesh_key_file = \"mesh.key\"\n", 3,
               "link.agent_port");
  expect_error("[link]\ninterfaces = [\"eth0\"]\n[security]\nmesh_key_file = \"mesh.key\"\nreplay_window = 32\n", 5,
               "security.replay_window");
  expect_error(kMinimal + "[routing]\nhello_interval_ms = 50\n", 6, "routing.hello_interval_ms");
  expect_error(kMinimal + "[routing]\nwillingness = 8\n", 6, "routing.willingness");
  expect_error(kMinimal + "[transport]\nflood_hold_ms = 0\n", 6, "transport.flood_hold_ms");
  expect_error("[link]\ninterfaces = [\"eth0\"]\nolsr_port = 0\n[security]\nmesh_key_file = \"mesh.key\"\n", 3,
               "link.olsr_port");
  expect_error(kMinimal + "[transport]\ndefault_ttl = 256\n", 6, "transport.default_ttl");
  expect_error(kMinimal + "[transport]\nhop_arq_retransmissions = 17\n", 6, "transport.hop_arq_retransmissions");
  message = expect_error(kMinimal + "[transport]\nhop_arq_rto_floor_ms = 50\nhop_arq_rto_cap_ms = 20\n", 7,
                         "transport.hop_arq_rto_cap_ms");
  EXPECT_THAT(message, HasSubstr("is below transport.hop_arq_rto_floor_ms"));
  message = expect_error(kMinimal + "[transport]\nhop_arq_rto_cap_ms = 2000\nhop_arq_dedupe_hold_ms = 8000\n", 7,
                         "transport.hop_arq_dedupe_hold_ms");
  EXPECT_THAT(message, HasSubstr("or a late hop retransmission is handed on twice"));
  message = expect_error(kMinimal + "[transport]\nhop_arq_rto_cap_ms = 20000\n", 6, "transport.hop_arq_rto_cap_ms");
  EXPECT_THAT(message, HasSubstr("must exceed (hop_arq_retransmissions + 1) * hop_arq_rto_cap_ms (80000)"));
  message = expect_error(kMinimal + "[requests]\n\nbackoff = 0.5\n", 7, "requests.backoff");
  EXPECT_THAT(message, HasSubstr("0.5 is out of range 1..10"));
  expect_error(kMinimal + "[requests]\njitter = 0.75\n", 6, "requests.jitter");
  expect_error(kMinimal + "[requests]\njitter = nan\n", 6, "requests.jitter");
  expect_error(kMinimal + "[requests]\ndeadline_ms = -1\n", 6, "requests.deadline_ms");
  expect_error(kMinimal + "[admin]\nping_timeout_ms = 0\n", 6, "admin.ping_timeout_ms");
  expect_error("[node]\nlocation = [1, 2]\n" + kMinimal, 2, "node.location");
  expect_error("[node]\nlocation = [1, inf, 2]\n" + kMinimal, 2, "node.location");
  expect_error("[node]\nname = \"two words\"\n" + kMinimal, 2, "node.name");
  expect_error("[node]\nname = \"\"\n" + kMinimal, 2, "node.name");
  expect_error(kMinimal + "[storage]\ndata_dir = \"\"\n", 6, "storage.data_dir");
  expect_error("[link]\ninterfaces = [\"averyveryverylongname\"]\n[security]\nmesh_key_file = \"mesh.key\"\n", 2,
               "link.interfaces");
  expect_error("[link]\ninterfaces = [\"eth0\", \"eth0\"]\n[security]\nmesh_key_file = \"mesh.key\"\n", 2,
               "link.interfaces");
}

TEST_F(ConfigTest, BadEnumValues) {
  auto message = expect_error(
      "[link]\ninterfaces = [\"eth0\"]\nmode = \"wifi\"\n[security]\nmesh_key_file = \"mesh.key\"\n", 3, "link.mode");
  EXPECT_THAT(message,
              HasSubstr("link.mode: expected \"interface\" or \"loopback\", got \"wifi\". Fix: set mode = "
                        "\"interface\" to use real network interfaces, or \"loopback\" for a local test mesh."));
  message = expect_error(kMinimal + "[log]\nlevel = \"verbose\"\n", 6, "log.level");
  EXPECT_THAT(message, HasSubstr("got \"verbose\""));
  message = expect_error(kMinimal + "[log.layers]\nrouting = \"loud\"\n", 6, "log.layers.routing");
  EXPECT_THAT(message, HasSubstr("got \"loud\""));
  message = expect_error(kMinimal + "[log.layers]\nroutng = \"debug\"\n", 6, "log.layers.routng");
  EXPECT_THAT(message, HasSubstr("did you mean \"routing\"?"));
}

TEST_F(ConfigTest, BadAddress) {
  for (const char* bad : {"10.0.0", "10.0.0.256", "010.0.0.1", "10.0.0.1/24", "node-1"}) {
    SCOPED_TRACE(bad);
    const auto message =
        expect_error("[node]\n\naddress = \"" + std::string(bad) + "\"\n" + kMinimal, 3, "node.address");
    EXPECT_THAT(message, HasSubstr("is not an IPv4 address"));
  }
}

TEST_F(ConfigTest, HoldTimesMustExceedTheirIntervals) {
  auto message = expect_error(kMinimal + "[routing]\nhello_interval_ms = 1000\nneighb_hold_ms = 1000\n", 7,
                              "routing.neighb_hold_ms");
  EXPECT_THAT(message, HasSubstr("must exceed routing.hello_interval_ms"));
  // Only the interval was written: it is the line to blame.
  message = expect_error(kMinimal + "[routing]\nhello_interval_ms = 7000\n", 6, "routing.hello_interval_ms");
  EXPECT_THAT(message, HasSubstr("neighb_hold_ms (6000)"));
  expect_error(kMinimal + "[routing]\ntc_interval_ms = 20000\n", 6, "routing.tc_interval_ms");
  expect_error(kMinimal + "[routing]\nmid_hold_ms = 5000\n", 6, "routing.mid_hold_ms");
  expect_error(kMinimal + "[routing]\nhna_interval_ms = 15000\n", 6, "routing.hna_interval_ms");
  message = expect_error(kMinimal + "[routing]\nmax_jitter_ms = 2000\n", 6, "routing.max_jitter_ms");
  EXPECT_THAT(message, HasSubstr("must be below routing.hello_interval_ms (2000)"));
}

TEST_F(ConfigTest, HnaNetworksMustBeNetworks) {
  for (const char* bad : {"\"10.1.0.0\"", "\"10.1.0.0/33\"", "\"10.1.0.1/24\"", "\"10.1.0.0/x\"", "5",
                          "\"10.1.0.0/24\", \"10.1.0.0/24\""}) {
    SCOPED_TRACE(bad);
    expect_error(kMinimal + "[routing]\nhna_networks = [" + bad + "]\n", 6, "routing.hna_networks");
  }
  expect_error(kMinimal + "[routing]\nhna_networks = \"10.1.0.0/24\"\n", 6, "routing.hna_networks");
  const AgentConfig config = parse(kMinimal + "[routing]\nhna_networks = [\"0.0.0.0/0\", \"10.1.2.3/32\"]\n");
  ASSERT_EQ(config.node.routing.hna_networks.size(), 2u);
  EXPECT_EQ(config.node.routing.hna_networks[0].netmask, core::Ipv4Address(0));
  EXPECT_EQ(config.node.routing.hna_networks[1].netmask, core::Ipv4Address(0xffffffffu));
}

TEST_F(ConfigTest, OlsrPortDefaultsPerModeAndMustDifferFromTheAgentPort) {
  EXPECT_EQ(parse(kMinimal).link.olsr_port, 698);
  EXPECT_EQ(parse("[link]\ninterfaces = [\"eth0\"]\nolsr_port = 6990\n[security]\nmesh_key_file = \"mesh.key\"\n")
                .link.olsr_port,
            6990);
  auto message =
      expect_error("[link]\ninterfaces = [\"eth0\"]\nagent_port = 698\n[security]\nmesh_key_file = \"mesh.key\"\n", 3,
                   "link.agent_port");
  EXPECT_THAT(message, HasSubstr("both 698"));
  write_file(dir_ / "topo.txt", "127.0.0.1 127.0.0.2\n");
  const std::string loopback =
      "[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n"
      "[security]\nmesh_key_file = \"mesh.key\"\n";
  EXPECT_EQ(parse(loopback).link.olsr_port, 6981);
  message = expect_error(
      "[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n"
      "agent_port = 65535\n[security]\nmesh_key_file = \"mesh.key\"\n",
      6, "link.agent_port");
  EXPECT_THAT(message, HasSubstr("agent_port + 1"));
}

TEST_F(ConfigTest, KernelRouteKeys) {
  AgentConfig config = parse(kMinimal + "[routing]\ninstall_kernel_routes = true\nkernel_route_protocol = 5\n");
  EXPECT_TRUE(config.kernel_routes.install);
  EXPECT_EQ(config.kernel_routes.protocol, 5);
  config = parse(kMinimal + "[routing]\ninstall_kernel_routes = false\nkernel_route_protocol = 255\n");
  EXPECT_FALSE(config.kernel_routes.install);
  EXPECT_EQ(config.kernel_routes.protocol, 255);
  config = parse(kMinimal + "[routing]\ninstall_kernel_routes = true\n");
  EXPECT_EQ(config.kernel_routes.protocol, 158);
}

TEST_F(ConfigTest, RoutingOnlyAndMixedMeshKeys) {
  EXPECT_FALSE(parse(kMinimal).node.mixed_mesh);
  EXPECT_TRUE(parse(kMinimal + "[routing]\nmixed_mesh = true\n").node.mixed_mesh);
  expect_error(kMinimal + "[routing]\nmixed_mesh = 1\n", 6, "routing.mixed_mesh");
  EXPECT_FALSE(parse(kMinimal).node.routing_only);
  EXPECT_TRUE(parse(kMinimal + "[routing]\nrouting_only = true\n").node.routing_only);
  expect_error(kMinimal + "[routing]\nrouting_only = \"yes\"\n", 6, "routing.routing_only");
}

TEST_F(ConfigTest, KernelRouteKeysAreValidated) {
  auto message =
      expect_error(kMinimal + "[routing]\ninstall_kernel_routes = \"yes\"\n", 6, "routing.install_kernel_routes");
  EXPECT_THAT(message, HasSubstr("expected a boolean, got a string (\"yes\")"));
  EXPECT_THAT(message, HasSubstr("Fix: set install_kernel_routes to true or false"));
  expect_error(kMinimal + "[routing]\ninstall_kernel_routes = 1\n", 6, "routing.install_kernel_routes");
  // The numbers of the kernel, boot scripts and the administrator, and beyond a byte.
  for (const char* bad : {"0", "4", "256", "-1"}) {
    SCOPED_TRACE(bad);
    message = expect_error(kMinimal + "[routing]\n\nkernel_route_protocol = " + bad + "\n", 7,
                           "routing.kernel_route_protocol");
    EXPECT_THAT(message, HasSubstr("is out of range 5..255"));
  }
  message = expect_error(kMinimal + "[routing]\nkernel_route_protocol = \"158\"\n", 6, "routing.kernel_route_protocol");
  EXPECT_THAT(message, HasSubstr("expected an integer"));
  message = expect_error(kMinimal + "[routing]\ninstall_kernel_rotues = true\n", 6, "routing.install_kernel_rotues");
  EXPECT_THAT(message, HasSubstr("did you mean \"install_kernel_routes\"?"));
}

TEST_F(ConfigTest, KernelRoutesAreRefusedInLoopbackMode) {
  write_file(dir_ / "topo.txt", "127.0.0.1 127.0.0.2\n");
  const std::string loopback =
      "[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n"
      "[security]\nmesh_key_file = \"mesh.key\"\n[routing]\n";
  const auto message = expect_error(loopback + "install_kernel_routes = true\n", 9, "routing.install_kernel_routes");
  EXPECT_THAT(message, HasSubstr("loopback mode"));
  EXPECT_THAT(message, HasSubstr("Fix: set install_kernel_routes = false"));
  // Off, or only a protocol number: fine.
  EXPECT_FALSE(parse(loopback + "install_kernel_routes = false\nkernel_route_protocol = 200\n").kernel_routes.install);
}

TEST_F(ConfigTest, DedupeHoldMustExceedDeadline) {
  auto message = expect_error(kMinimal + "[requests]\ndedupe_hold_ms = 10000\n", 6, "requests.dedupe_hold_ms");
  EXPECT_THAT(message, HasSubstr("must exceed requests.deadline_ms (10000)"));
  expect_error(kMinimal + "[requests]\ndeadline_ms = 90000\n", 6, "requests.deadline_ms");
}

TEST_F(ConfigTest, MembershipKeysReachMedleyOptions) {
  const AgentConfig config = parse(kMinimal +
                                   "[membership]\nprobe_period_ms = 2000\nprobe_timeout_ms = 700\n"
                                   "indirect_checks = 5\nalpha = 0\nsuspicion_mult = 3.5\nsuspicion_max_mult = 2\n"
                                   "retransmit_mult = 6\njoin_retry_ms = 1500\npush_pull_interval_ms = 45000\n"
                                   "reconnect_interval_ms = 7000\nfailed_retention_s = 120\n");
  const auto& m = config.node.membership;
  EXPECT_EQ(m.probe_period, 2000ms);
  EXPECT_EQ(m.probe_timeout, 700ms);
  EXPECT_EQ(m.indirect_checks, 5u);
  EXPECT_EQ(m.alpha, 0.0);
  EXPECT_EQ(m.suspicion_mult, 3.5);
  EXPECT_EQ(m.suspicion_max_mult, 2.0);
  EXPECT_EQ(m.retransmit_mult, 6u);
  EXPECT_EQ(m.join_retry, 1500ms);
  EXPECT_EQ(m.push_pull_interval, 45000ms);
  EXPECT_EQ(m.reconnect_interval, 7000ms);
  EXPECT_EQ(m.failed_retention, std::chrono::seconds(120));
}

TEST_F(ConfigTest, MembershipValuesAreValidated) {
  auto message = expect_error(kMinimal + "[membership]\nindirect_checks = 17\n", 6, "membership.indirect_checks");
  EXPECT_THAT(message, HasSubstr("17 is out of range 0..16"));
  message = expect_error(kMinimal + "[membership]\nalpha = \"3\"\n", 6, "membership.alpha");
  EXPECT_THAT(message, HasSubstr("expected a number"));
  expect_error(kMinimal + "[membership]\nsuspicion_mult = 0.1\n", 6, "membership.suspicion_mult");
  expect_error(kMinimal + "[membership]\nprobe_period_ms = 5\n", 6, "membership.probe_period_ms");
  message = expect_error(kMinimal + "[membership]\nprobe_period_ms = 400\n", 6, "membership.probe_period_ms");
  EXPECT_THAT(message, HasSubstr("must be below membership.probe_period_ms (400)"));
  expect_error(kMinimal + "[membership]\nprobe_period_ms = 400\nprobe_timeout_ms = 400\n", 7,
               "membership.probe_timeout_ms");
  expect_error(kMinimal + "[membership]\nprobe_timeout_ms = 1\nprob_period_ms = 2\n", 7, "membership.prob_period_ms");
  message =
      expect_error(kMinimal + "[requests]\ndeadline_ms = 1000\ndedupe_hold_ms = 4000\n", 7, "requests.dedupe_hold_ms");
  EXPECT_THAT(message, HasSubstr("list-sync deadline"));
}

TEST_F(ConfigTest, MutexKeysReachCameraOptions) {
  const AgentConfig config =
      parse(kMinimal +
            "[mutex]\nexpected_nodes = 40\nboot_grace_s = 0\nboot_settle_ms = 750\nretry_first_timeout_ms = 100\n"
            "retry_backoff = 1.0\nretry_max_interval_ms = 900\nretry_deadline_s = 30\n"
            "tolerated_failures = 2\nsize_window_s = 120\nsize_margin = 0.5\n"
            "slow_path = false\nmax_ok_bytes = 600\nhold_lease_ms = 12000\n"
            "[membership]\nsilent_probes_to_suspect = 1\npush_pull_scale_threshold = 0\n"
            "push_pull_fast_rounds = 5\n");
  const mutex::CameraOptions& c = config.node.mutex;
  EXPECT_EQ(c.network_size.floor, 40u);
  EXPECT_EQ(c.boot_grace, std::chrono::seconds(0));
  EXPECT_EQ(c.boot_settle, 750ms);
  EXPECT_EQ(c.retry.first_timeout, 100ms);
  EXPECT_EQ(c.retry.backoff, 1.0);
  EXPECT_EQ(c.retry.max_interval, 900ms);
  EXPECT_EQ(c.retry.deadline, std::chrono::seconds(30));
  EXPECT_EQ(c.tolerated_failures, 2u);
  EXPECT_EQ(c.network_size.window, std::chrono::seconds(120));
  EXPECT_EQ(c.network_size.margin, 0.5);
  EXPECT_FALSE(c.slow_path_enabled);
  EXPECT_EQ(c.max_ok_bytes, 600u);
  EXPECT_EQ(c.hold_lease, 12000ms);
  const auto& m = config.node.membership;
  EXPECT_EQ(m.silent_probes_to_suspect, 1u);
  EXPECT_EQ(m.push_pull_scale_threshold, 0u);
  EXPECT_EQ(m.push_pull_fast_rounds, 5u);
}

TEST_F(ConfigTest, MutexValuesAreValidated) {
  auto message = expect_error(kMinimal + "[mutex]\nexpected_nodes = -1\n", 6, "mutex.expected_nodes");
  EXPECT_THAT(message, HasSubstr("out of range"));
  expect_error(kMinimal + "[mutex]\nmax_ok_bytes = 100\n", 6, "mutex.max_ok_bytes");
  expect_error(kMinimal + "[mutex]\nretry_backoff = 0.5\n", 6, "mutex.retry_backoff");
  message = expect_error(kMinimal + "[mutex]\nslow_path = 1\n", 6, "mutex.slow_path");
  EXPECT_THAT(message, HasSubstr("boolean"));
  expect_error(kMinimal + "[membership]\nsilent_probes_to_suspect = 0\n", 6, "membership.silent_probes_to_suspect");
  // The lease must run out well before the others may take a silent holder's lock.
  message = expect_error(kMinimal + "[mutex]\nhold_lease_ms = 8000\n", 6, "mutex.hold_lease_ms");
  EXPECT_THAT(message, HasSubstr("at most two thirds of mutex.retry_deadline_s (10000 ms)"));
  // Under the default 5 s lease, a 6 s deadline is what the user wrote wrong.
  expect_error(kMinimal + "[mutex]\nretry_deadline_s = 6\n", 6, "mutex.retry_deadline_s");
  EXPECT_EQ(parse(kMinimal + "[mutex]\nhold_lease_ms = 0\nretry_deadline_s = 1\n").node.mutex.hold_lease, 0ms);
}

TEST_F(ConfigTest, MaxIntervalBelowFirstTimeout) {
  expect_error(kMinimal + "[requests]\nfirst_timeout_ms = 500\nmax_interval_ms = 400\n", 7, "requests.max_interval_ms");
}

TEST_F(ConfigTest, InterfaceModeNeedsInterfaces) {
  // Missing key: the line of its table.
  auto message =
      expect_error("[security]\nmesh_key_file = \"mesh.key\"\n\n[link]\nmode = \"interface\"\n", 5, "link.interfaces");
  EXPECT_THAT(message, HasSubstr("interfaces = [\"wlan0\"]"));
  // No [link] at all: line 1.
  expect_error("[security]\nmesh_key_file = \"mesh.key\"\n", 1, "link.interfaces");
  expect_error("[link]\ninterfaces = []\n[security]\nmesh_key_file = \"mesh.key\"\n", 2, "link.interfaces");
}

TEST_F(ConfigTest, LoopbackModeNeedsTopologyFileAndAddress) {
  write_file(dir_ / "topo.txt", "127.0.0.1 127.0.0.2\n");
  const std::string security = "[security]\nmesh_key_file = \"mesh.key\"\n";
  auto message = expect_error("[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\n" + security, 4,
                              "link.topology_file");
  EXPECT_THAT(message, HasSubstr("loopback mode needs a topology file"));
  message = expect_error("[node]\nname = \"a\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n" + security,
                         1, "node.address");
  EXPECT_THAT(message, HasSubstr("loopback mode needs a node address"));
  expect_error("[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n" + security, 1, "node.address");
  expect_error(
      "[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n" + security + "[node]\naddress = \"0.0.0.0\"\n", 7,
      "node.address");

  const AgentConfig config =
      parse("[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n" + security);
  EXPECT_EQ(config.link.mode, LinkConfig::Mode::loopback);
  EXPECT_TRUE(config.link.interfaces.empty());
}

TEST_F(ConfigTest, BrokenTopologyFileNamesBothFiles) {
  write_file(dir_ / "topo.txt", "# line mesh\n127.0.0.1 127.0.0.2\n127.0.0.2 127.0.0.2\n");
  const std::string text =
      "[node]\naddress = \"127.0.0.1\"\n[link]\nmode = \"loopback\"\ntopology_file = \"topo.txt\"\n"
      "[security]\nmesh_key_file = \"mesh.key\"\n";
  auto message = expect_error(text, 5, "link.topology_file");
  EXPECT_THAT(message, HasSubstr((dir_ / "topo.txt").string() + ":3:"));
  EXPECT_THAT(message, HasSubstr("self-loop"));

  std::filesystem::remove(dir_ / "topo.txt");
  message = expect_error(text, 5, "link.topology_file");
  EXPECT_THAT(message, HasSubstr("cannot read topology file"));
}

TEST_F(ConfigTest, SyntaxErrorsNameLineAndColumn) {
  // The unclosed array is noticed where the next table header starts.
  auto message = expect_error("[node]\nname = \"a\"\nlocation = [1, 2, 3\n" + kMinimal, 4, "TOML syntax error");
  EXPECT_THAT(message, HasSubstr("test.toml:4:1:"));
  message = expect_error("[node]\nname = kitchen\n", 2, "TOML syntax error");
  EXPECT_THAT(message, HasSubstr("test.toml:2:"));
  expect_error("[node\n", 1, "TOML syntax error");
  expect_error(kMinimal + "[security]\nreplay_window = 64\n", 5, "TOML syntax error");  // table redefined
}

TEST_F(ConfigTest, MissingKeyFileSaysHowToCreateIt) {
  auto message = expect_error("[link]\ninterfaces = [\"eth0\"]\n[security]\n\nmesh_key_file = \"absent.key\"\n", 5,
                              "security.mesh_key_file");
  EXPECT_THAT(message, HasSubstr((dir_ / "absent.key").string()));
  EXPECT_THAT(message, HasSubstr("openssl rand -hex 32 > " + (dir_ / "absent.key").string()));
  EXPECT_THAT(message, HasSubstr("every node"));
  EXPECT_THAT(message, HasSubstr("0600"));
  // The default path, when it does not exist here: blamed on the [security] line, or line 1.
  if (!std::filesystem::exists("/etc/meshagent/mesh.key")) {
    expect_error("[link]\ninterfaces = [\"eth0\"]\n", 1, "security.mesh_key_file");
    expect_error("[link]\ninterfaces = [\"eth0\"]\n[security]\nreplay_window = 64\n", 3, "security.mesh_key_file");
  }
}

TEST_F(ConfigTest, AcceptedKeyFileIsReadForARotation) {
  const std::string other = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
  write_file(dir_ / "next.key", other + "\n");
  const AgentConfig config = parse(
      "[link]\ninterfaces = [\"eth0\"]\n[security]\nmesh_key_file = \"mesh.key\"\n"
      "accepted_mesh_key_file = \"next.key\"\n");
  EXPECT_EQ(config.accepted_mesh_key_file, (dir_ / "next.key").string());
  ASSERT_TRUE(config.node.accepted_mesh_key);
  EXPECT_EQ(config.node.accepted_mesh_key->bytes(), core::MeshKey::from_hex(other)->bytes());
  EXPECT_NE(config.node.accepted_mesh_key->bytes(), config.node.mesh_key.bytes());
  // Absent by default.
  EXPECT_FALSE(parse(kMinimal).node.accepted_mesh_key);
}

TEST_F(ConfigTest, AcceptedKeyFileMistakesNameTheirLineAndKey) {
  const std::string head = "[link]\ninterfaces = [\"eth0\"]\n[security]\nmesh_key_file = \"mesh.key\"\n";
  auto message = expect_error(head + "accepted_mesh_key_file = \"absent.key\"\n", 5, "security.accepted_mesh_key_file");
  EXPECT_THAT(message, HasSubstr((dir_ / "absent.key").string()));
  write_file(dir_ / "bad.key", "0011");
  message = expect_error(head + "accepted_mesh_key_file = \"bad.key\"\n", 5, "security.accepted_mesh_key_file");
  EXPECT_THAT(message, HasSubstr("malformed"));
  // The same key twice is a mistake: a rotation names the other key.
  write_file(dir_ / "copy.key", std::string(kKeyHex) + "\n");
  message = expect_error(head + "accepted_mesh_key_file = \"copy.key\"\n", 5, "security.accepted_mesh_key_file");
  EXPECT_THAT(message, HasSubstr("same key"));
}

TEST_F(ConfigTest, MalformedKeyFileSaysHowToCreateIt) {
  const std::string text = "[link]\ninterfaces = [\"eth0\"]\n[security]\nmesh_key_file = \"bad.key\"\n";
  for (const std::string& content : {std::string("0011223344"), std::string(64, 'g'), std::string(),
                                     std::string(kKeyHex) + "00", std::string(5000, '0')}) {
    SCOPED_TRACE(content.substr(0, 80));
    write_file(dir_ / "bad.key", content);
    const auto message = expect_error(text, 4, "security.mesh_key_file");
    EXPECT_THAT(message, HasSubstr("malformed"));
    EXPECT_THAT(message, HasSubstr("openssl rand -hex 32 > " + (dir_ / "bad.key").string()));
  }
}

TEST_F(ConfigTest, ReadableKeyFileOnlyWarns) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(captured);
  auto& logger = core::log("agent");
  logger.sinks().push_back(sink);
  write_file(dir_ / "open.key", kKeyHex, 0644);
  const AgentConfig config = parse("[link]\ninterfaces = [\"eth0\"]\n[security]\nmesh_key_file = \"open.key\"\n");
  logger.sinks().pop_back();
  EXPECT_EQ(config.node.mesh_key.bytes().size(), 32u);
  EXPECT_THAT(captured.str(), HasSubstr("mesh key file"));
  EXPECT_THAT(captured.str(), HasSubstr((dir_ / "open.key").string()));

  captured.str("");
  logger.sinks().push_back(sink);
  parse(kMinimal);  // mesh.key is 0600
  logger.sinks().pop_back();
  EXPECT_THAT(captured.str(), Not(HasSubstr("mesh key file")));
}

TEST_F(ConfigTest, SeveralProblemsAreReportedTogether) {
  const std::string message = error_of(kMinimal + "[transport]\ndefault_ttl = 0\n[admin]\npingtimeout_ms = 5\n");
  EXPECT_THAT(message, HasSubstr("test.toml:6: transport.default_ttl:"));
  EXPECT_THAT(message, HasSubstr("test.toml:8: admin.pingtimeout_ms:"));
}

TEST_F(ConfigTest, KnownKeysAreAllAccepted) {
  const auto keys = known_config_keys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  for (const char* key : {"node.name",
                          "node.address",
                          "node.location",
                          "link.mode",
                          "link.interfaces",
                          "link.topology_file",
                          "link.agent_port",
                          "security.mesh_key_file",
                          "security.replay_window",
                          "link.olsr_port",
                          "routing.willingness",
                          "routing.hello_interval_ms",
                          "routing.tc_interval_ms",
                          "routing.mid_interval_ms",
                          "routing.hna_interval_ms",
                          "routing.neighb_hold_ms",
                          "routing.top_hold_ms",
                          "routing.dup_hold_ms",
                          "routing.mid_hold_ms",
                          "routing.hna_hold_ms",
                          "routing.max_jitter_ms",
                          "routing.route_recalc_interval_ms",
                          "routing.hna_networks",
                          "routing.install_kernel_routes",
                          "routing.routing_only",
                          "routing.mixed_mesh",
                          "routing.kernel_route_protocol",
                          "transport.default_ttl",
                          "transport.flood_hold_ms",
                          "transport.hop_arq",
                          "transport.hop_arq_retransmissions",
                          "transport.hop_arq_initial_rto_ms",
                          "transport.hop_arq_rto_floor_ms",
                          "transport.hop_arq_rto_cap_ms",
                          "transport.hop_arq_dedupe_hold_ms",
                          "requests.first_timeout_ms",
                          "requests.backoff",
                          "requests.max_interval_ms",
                          "requests.jitter",
                          "requests.deadline_ms",
                          "requests.dedupe_hold_ms",
                          "membership.probe_period_ms",
                          "membership.probe_timeout_ms",
                          "membership.indirect_checks",
                          "membership.alpha",
                          "membership.suspicion_mult",
                          "membership.suspicion_max_mult",
                          "membership.retransmit_mult",
                          "membership.join_retry_ms",
                          "membership.push_pull_interval_ms",
                          "membership.reconnect_interval_ms",
                          "membership.failed_retention_s",
                          "membership.silent_probes_to_suspect",
                          "membership.silence_radius_hops",
                          "membership.far_nacks_to_suspect",
                          "membership.push_pull_scale_threshold",
                          "membership.push_pull_fast_rounds",
                          "kgroup.genesis_settle_ms",
                          "kgroup.genesis_failed_memory_s",
                          "kgroup.snapshot_after_entries",
                          "kgroup.migration_postpone_max_s",
                          "kgroup.coalesce_heartbeats",
                          "mutex.expected_nodes",
                          "mutex.boot_grace_s",
                          "mutex.boot_settle_ms",
                          "mutex.retry_first_timeout_ms",
                          "mutex.retry_backoff",
                          "mutex.retry_max_interval_ms",
                          "mutex.retry_deadline_s",
                          "mutex.hold_lease_ms",
                          "mutex.tolerated_failures",
                          "mutex.size_window_s",
                          "mutex.size_margin",
                          "mutex.slow_path",
                          "mutex.max_ok_bytes",
                          "devices.catalog",
                          "devices.poll_interval_ms",
                          "devices.down_after_failures",
                          "devices.command_timeout_ms",
                          "devices.actuation_stall_ms",
                          "devices.actuation_check_ms",
                          "devices.catalog_sync_interval_ms",
                          "devices.subscription_renew_ms",
                          "devices.subscription_lease_ms",
                          "routines.visibility",
                          "routines.lock_strategy",
                          "routines.poll_interval_ms",
                          "routines.lock_renew_ms",
                          "routines.lock_reclaim_ms",
                          "routines.ola_backoff_min_ms",
                          "routines.ola_backoff_max_ms",
                          "routines.run_timeout_ms",
                          "admin.socket",
                          "admin.ping_timeout_ms",
                          "storage.data_dir",
                          "log.level",
                          "log.layers.*"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  }
  EXPECT_EQ(keys.size(), 121u);
}

// The shipped example: valid as is (its key path is relative, so a key next
// to it is found), its values are the documented defaults, and it mentions
// every key the parser accepts.
TEST_F(ConfigTest, ExampleFileParsesAndDocumentsEveryKey) {
  const std::filesystem::path example = std::filesystem::path(MESH_SOURCE_DIR) / "deploy/examples/agent.toml";
  const std::string text = read_file(example);
  ASSERT_FALSE(text.empty()) << example;

  const AgentConfig config = parse_config(text, example.string(), dir_.string());
  const AgentConfig defaults = parse(kMinimal);
  EXPECT_EQ(config.mesh_key_file, (dir_ / "mesh.key").string());
  EXPECT_EQ(config.link.mode, LinkConfig::Mode::interface);
  EXPECT_EQ(config.link.interfaces, std::vector<std::string>{"wlan0"});
  EXPECT_EQ(config.link.agent_port, defaults.link.agent_port);
  EXPECT_EQ(config.node.name, defaults.node.name);
  EXPECT_EQ(config.node.location, defaults.node.location);
  EXPECT_EQ(config.node.replay_window, defaults.node.replay_window);
  EXPECT_EQ(config.link.olsr_port, defaults.link.olsr_port);
  EXPECT_EQ(config.node.transport.default_ttl, defaults.node.transport.default_ttl);
  EXPECT_EQ(config.node.transport.flood_hold, defaults.node.transport.flood_hold);
  const auto& arq = config.node.transport.hop_arq;
  const auto& default_arq = defaults.node.transport.hop_arq;
  EXPECT_EQ(arq.enabled, default_arq.enabled);
  EXPECT_EQ(arq.max_retransmissions, default_arq.max_retransmissions);
  EXPECT_EQ(arq.initial_rto, default_arq.initial_rto);
  EXPECT_EQ(arq.rto_floor, default_arq.rto_floor);
  EXPECT_EQ(arq.rto_cap, default_arq.rto_cap);
  EXPECT_EQ(arq.dedupe_hold, default_arq.dedupe_hold);
  EXPECT_EQ(config.node.routing.willingness, defaults.node.routing.willingness);
  EXPECT_EQ(config.node.routing.hello_interval, defaults.node.routing.hello_interval);
  EXPECT_EQ(config.node.routing.tc_interval, defaults.node.routing.tc_interval);
  EXPECT_EQ(config.node.routing.mid_interval, defaults.node.routing.mid_interval);
  EXPECT_EQ(config.node.routing.hna_interval, defaults.node.routing.hna_interval);
  EXPECT_EQ(config.node.routing.neighb_hold, defaults.node.routing.neighb_hold);
  EXPECT_EQ(config.node.routing.top_hold, defaults.node.routing.top_hold);
  EXPECT_EQ(config.node.routing.dup_hold, defaults.node.routing.dup_hold);
  EXPECT_EQ(config.node.routing.mid_hold, defaults.node.routing.mid_hold);
  EXPECT_EQ(config.node.routing.hna_hold, defaults.node.routing.hna_hold);
  EXPECT_EQ(config.node.routing.max_jitter, defaults.node.routing.max_jitter);
  EXPECT_EQ(config.node.routing.route_recalc_interval, defaults.node.routing.route_recalc_interval);
  EXPECT_EQ(config.node.routing.hna_networks, defaults.node.routing.hna_networks);
  EXPECT_EQ(config.kernel_routes.install, defaults.kernel_routes.install);
  EXPECT_EQ(config.node.routing_only, defaults.node.routing_only);
  EXPECT_EQ(config.node.mixed_mesh, defaults.node.mixed_mesh);
  EXPECT_EQ(config.kernel_routes.protocol, defaults.kernel_routes.protocol);
  EXPECT_EQ(config.node.messaging.retry.first_timeout, defaults.node.messaging.retry.first_timeout);
  EXPECT_EQ(config.node.messaging.retry.backoff, defaults.node.messaging.retry.backoff);
  EXPECT_EQ(config.node.messaging.retry.max_interval, defaults.node.messaging.retry.max_interval);
  EXPECT_EQ(config.node.messaging.retry.jitter, defaults.node.messaging.retry.jitter);
  EXPECT_EQ(config.node.messaging.retry.deadline, defaults.node.messaging.retry.deadline);
  EXPECT_EQ(config.node.messaging.dedupe_hold, defaults.node.messaging.dedupe_hold);
  EXPECT_EQ(config.node.ping_timeout, defaults.node.ping_timeout);
  EXPECT_EQ(config.node.membership.probe_period, defaults.node.membership.probe_period);
  EXPECT_EQ(config.node.membership.probe_timeout, defaults.node.membership.probe_timeout);
  EXPECT_EQ(config.node.membership.indirect_checks, defaults.node.membership.indirect_checks);
  EXPECT_EQ(config.node.membership.alpha, defaults.node.membership.alpha);
  EXPECT_EQ(config.node.membership.suspicion_mult, defaults.node.membership.suspicion_mult);
  EXPECT_EQ(config.node.membership.suspicion_max_mult, defaults.node.membership.suspicion_max_mult);
  EXPECT_EQ(config.node.membership.retransmit_mult, defaults.node.membership.retransmit_mult);
  EXPECT_EQ(config.node.membership.join_retry, defaults.node.membership.join_retry);
  EXPECT_EQ(config.node.membership.push_pull_interval, defaults.node.membership.push_pull_interval);
  EXPECT_EQ(config.node.membership.reconnect_interval, defaults.node.membership.reconnect_interval);
  EXPECT_EQ(config.node.membership.failed_retention, defaults.node.membership.failed_retention);
  EXPECT_EQ(config.node.membership.silent_probes_to_suspect, defaults.node.membership.silent_probes_to_suspect);
  EXPECT_EQ(config.node.membership.push_pull_scale_threshold, defaults.node.membership.push_pull_scale_threshold);
  EXPECT_EQ(config.node.membership.push_pull_fast_rounds, defaults.node.membership.push_pull_fast_rounds);
  const mutex::CameraOptions& cm = config.node.mutex;
  const mutex::CameraOptions& cd = defaults.node.mutex;
  EXPECT_EQ(cm.network_size.floor, cd.network_size.floor);
  EXPECT_EQ(cm.boot_grace, cd.boot_grace);
  EXPECT_EQ(cm.retry.first_timeout, cd.retry.first_timeout);
  EXPECT_EQ(cm.retry.backoff, cd.retry.backoff);
  EXPECT_EQ(cm.retry.max_interval, cd.retry.max_interval);
  EXPECT_EQ(cm.retry.deadline, cd.retry.deadline);
  EXPECT_EQ(cm.tolerated_failures, cd.tolerated_failures);
  EXPECT_EQ(cm.network_size.window, cd.network_size.window);
  EXPECT_EQ(cm.network_size.margin, cd.network_size.margin);
  EXPECT_EQ(cm.slow_path_enabled, cd.slow_path_enabled);
  EXPECT_EQ(cm.max_ok_bytes, cd.max_ok_bytes);
  EXPECT_EQ(config.admin_socket, defaults.admin_socket);
  EXPECT_EQ(config.data_dir, defaults.data_dir);
  const DevicesConfig& dv = config.node.devices;
  const DevicesConfig& dd = defaults.node.devices;
  EXPECT_TRUE(config.catalog_file.empty());
  EXPECT_EQ(dv.leaders.poll_interval, dd.leaders.poll_interval);
  EXPECT_EQ(dv.leaders.down_after_failures, dd.leaders.down_after_failures);
  EXPECT_EQ(dv.service.command_timeout, dd.service.command_timeout);
  EXPECT_EQ(dv.sync.interval, dd.sync.interval);
  EXPECT_EQ(dv.watcher.renew_interval, dd.watcher.renew_interval);
  EXPECT_EQ(dv.watcher.lease, dd.watcher.lease);
  EXPECT_EQ(dv.leaders.lock_reclaim_after, dd.leaders.lock_reclaim_after);
  const RoutinesConfig& rv = config.node.routines;
  const RoutinesConfig& rd = defaults.node.routines;
  EXPECT_EQ(rv.leaders.strategy, rd.leaders.strategy);
  EXPECT_EQ(rv.leaders.poll_interval, rd.leaders.poll_interval);
  EXPECT_EQ(rv.leaders.renew_interval, rd.leaders.renew_interval);
  EXPECT_EQ(rv.leaders.backoff_min, rd.leaders.backoff_min);
  EXPECT_EQ(rv.leaders.backoff_max, rd.leaders.backoff_max);
  EXPECT_EQ(rv.service.run_timeout, rd.service.run_timeout);
  EXPECT_EQ(config.log_level, defaults.log_level);
  EXPECT_TRUE(config.layer_log_levels.empty());
  const KgroupConfig& kg = config.node.kgroup;
  const KgroupConfig& kd = defaults.node.kgroup;
  EXPECT_EQ(kg.selection.k, kd.selection.k);
  EXPECT_EQ(kg.selection.mode, kd.selection.mode);
  EXPECT_EQ(kg.selection.lsh.m, kd.selection.lsh.m);
  EXPECT_EQ(kg.selection.lsh.l, kd.selection.lsh.l);
  EXPECT_EQ(kg.selection.lsh.r, kd.selection.lsh.r);
  EXPECT_EQ(kg.selection.clusters.devices_per_cluster, kd.selection.clusters.devices_per_cluster);
  EXPECT_EQ(kg.epoch_length, kd.epoch_length);
  EXPECT_EQ(kg.replica.heartbeat_interval, kd.replica.heartbeat_interval);
  EXPECT_EQ(kg.replica.lease, kd.replica.lease);
  EXPECT_EQ(kg.replica.lease_margin, kd.replica.lease_margin);
  EXPECT_EQ(kg.replica.append_timeout, kd.replica.append_timeout);
  EXPECT_EQ(kg.replica.answer_timeout, kd.replica.answer_timeout);
  EXPECT_EQ(kg.replica.victory_timeout, kd.replica.victory_timeout);
  EXPECT_EQ(kg.replica.prepare_deadline, kd.replica.prepare_deadline);
  EXPECT_EQ(kg.replica.election_backoff, kd.replica.election_backoff);
  EXPECT_EQ(kg.replica.migration_retry, kd.replica.migration_retry);
  EXPECT_EQ(kg.replica.migration_postpone_max, kd.replica.migration_postpone_max);
  EXPECT_EQ(kg.write_timeout, kd.write_timeout);
  EXPECT_EQ(kg.write_retry, kd.write_retry);
  EXPECT_EQ(kg.write_attempt_timeout, kd.write_attempt_timeout);

  // Collect "table.key" for every `key = ...` line, commented out or not,
  // under the [table] header (also commented or not) it follows.
  std::set<std::string> documented;
  std::string table;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t pos = line.find_first_not_of(" \t#");
    if (pos == std::string::npos) continue;
    line = line.substr(pos);
    if (line[0] == '[') {
      table = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos || table.empty()) continue;
    const std::string key = line.substr(0, eq);
    if (key.find(' ') != std::string::npos) continue;
    documented.insert(table == "log.layers" ? "log.layers.*" : table + "." + key);
  }
  for (const auto& key : known_config_keys()) {
    EXPECT_TRUE(documented.count(key)) << key << " is not documented in " << example;
  }
  for (const auto& key : documented) {
    const auto keys = known_config_keys();
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << example << " documents unknown key " << key;
  }
}

TEST_F(ConfigTest, ExampleLoopbackTopologyIsALine) {
  write_file(dir_ / "agent.toml",
             "[node]\naddress = \"127.0.0.2\"\n[link]\nmode = \"loopback\"\ntopology_file = \"" MESH_SOURCE_DIR
             "/deploy/examples/loopback-topology.txt\"\n[security]\nmesh_key_file = \"mesh.key\"\n");
  const AgentConfig config = load_config((dir_ / "agent.toml").string());
  EXPECT_EQ(config.link.topology_file, MESH_SOURCE_DIR "/deploy/examples/loopback-topology.txt");
}

TEST_F(ConfigTest, KgroupKeysMapOntoKgroupConfig) {
  const AgentConfig config = parse(kMinimal +
                                   "[kgroup]\nk = 3\nselection = \"lsh\"\nlsh_m = 3\nlsh_l = 4\nlsh_r = 2.5\n"
                                   "devices_per_cluster = 10\nepoch_length_s = 600\nheartbeat_interval_ms = 50\n"
                                   "lease_ms = 400\nlease_margin_ms = 20\nappend_timeout_ms = 80\n"
                                   "answer_timeout_ms = 200\nvictory_timeout_ms = 900\nprepare_deadline_ms = 700\n"
                                   "election_backoff_ms = 60\nmigration_retry_ms = 300\nmigration_postpone_max_s = 90\n"
                                   "write_timeout_ms = 5000\n"
                                   "write_retry_ms = 100\nwrite_attempt_timeout_ms = 2000\n"
                                   "genesis_settle_ms = 1500\ngenesis_failed_memory_s = 120\n"
                                   "snapshot_after_entries = 64\n");
  const KgroupConfig& k = config.node.kgroup;
  EXPECT_EQ(k.selection.k, 3u);
  EXPECT_EQ(k.selection.mode, kgroup::SelectionMode::lsh);
  EXPECT_EQ(k.selection.lsh.m, 3u);
  EXPECT_EQ(k.selection.lsh.l, 4u);
  EXPECT_EQ(k.selection.lsh.r, 2.5);
  EXPECT_EQ(k.selection.clusters.devices_per_cluster, 10u);
  EXPECT_EQ(k.epoch_length, 600s);
  EXPECT_EQ(k.replica.heartbeat_interval, 50ms);
  EXPECT_EQ(k.replica.lease, 400ms);
  EXPECT_EQ(k.replica.lease_margin, 20ms);
  EXPECT_EQ(k.replica.append_timeout, 80ms);
  EXPECT_EQ(k.replica.answer_timeout, 200ms);
  EXPECT_EQ(k.replica.victory_timeout, 900ms);
  EXPECT_EQ(k.replica.prepare_deadline, 700ms);
  EXPECT_EQ(k.replica.election_backoff, 60ms);
  EXPECT_EQ(k.replica.migration_retry, 300ms);
  EXPECT_EQ(k.replica.migration_postpone_max, 90s);
  EXPECT_EQ(k.write_timeout, 5000ms);
  EXPECT_EQ(k.write_retry, 100ms);
  EXPECT_EQ(k.write_attempt_timeout, 2000ms);
  EXPECT_EQ(k.genesis_settle, 1500ms);
  EXPECT_EQ(k.genesis_failed_memory, 120s);
  EXPECT_EQ(k.replica.snapshot_after_entries, 64u);
  // The runtime sets the origin from the system clock, never the file.
  EXPECT_EQ(k.epoch_origin, core::TimePoint{});
}

TEST_F(ConfigTest, KgroupBadValuesNameLineAndKey) {
  auto message = expect_error(kMinimal + "[kgroup]\nk = 4\n", 6, "kgroup.k");
  EXPECT_THAT(message, HasSubstr("4 is even"));
  EXPECT_THAT(message, HasSubstr("set k to 3 or 5"));
  message = expect_error(kMinimal + "[kgroup]\nk = 17\n", 6, "kgroup.k");
  EXPECT_THAT(message, HasSubstr("out of range 1..15"));
  message = expect_error(kMinimal + "[kgroup]\nselection = \"random\"\n", 6, "kgroup.selection");
  EXPECT_THAT(message, HasSubstr("expected \"hash\" or \"lsh\""));
  expect_error(kMinimal + "[kgroup]\nlsh_r = 0\n", 6, "kgroup.lsh_r");
  expect_error(kMinimal + "[kgroup]\nlsh_m = \"2\"\n", 6, "kgroup.lsh_m");
  expect_error(kMinimal + "[kgroup]\nepoch_length_s = 0\n", 6, "kgroup.epoch_length_s");
  message = expect_error(kMinimal + "[kgroup]\nheartbeat_interval_ms = 500\nlease_ms = 400\n", 7, "kgroup.lease_ms");
  EXPECT_THAT(message, HasSubstr("must exceed kgroup.heartbeat_interval_ms (500)"));
  // Only the interval was written: blame it, since the lease default cannot be fixed in place.
  expect_error(kMinimal + "[kgroup]\nheartbeat_interval_ms = 600\n", 6, "kgroup.heartbeat_interval_ms");
  message = expect_error(kMinimal + "[kgroup]\nlease_margin_ms = 600\n", 6, "kgroup.lease_margin_ms");
  EXPECT_THAT(message, HasSubstr("must be below kgroup.lease_ms (600)"));
  message =
      expect_error(kMinimal + "[kgroup]\nwrite_attempt_timeout_ms = 60000\n", 6, "kgroup.write_attempt_timeout_ms");
  EXPECT_THAT(message, HasSubstr("requests.dedupe_hold_ms (60000)"));
  expect_error(kMinimal + "[kgroup]\nleader_lease_ms = 600\n", 6, "kgroup.leader_lease_ms");
  message = expect_error(kMinimal + "[kgroup]\nsnapshot_after_entries = 0\n", 6, "kgroup.snapshot_after_entries");
  EXPECT_THAT(message, HasSubstr("out of range 16..1000000"));
}

}  // namespace
}  // namespace mesh::agent

namespace mesh::agent {
namespace {

TEST_F(ConfigTest, DevicesCatalogIsLoadedAndItsErrorsNameFileLineAndKey) {
  write_file(dir_ / "catalog.toml",
             "[[device]]\nid = \"hall_light\"\nkind = \"dimmer\"\nlocation = [1.0, 2.0, 0.0]\n"
             "room = \"hall\"\ndriver = \"kasa://10.0.0.20\"\n"
             "[[routine]]\nid = \"hall_on\"\ntrigger = \"hall_light.power == off\"\n"
             "[[routine.command]]\ndevice = \"hall_light\"\nset = { power = \"on\" }\n");
  const AgentConfig config =
      parse(kMinimal + "[devices]\ncatalog = \"catalog.toml\"\npoll_interval_ms = 500\ndown_after_failures = 3\n");
  EXPECT_EQ(config.catalog_file, (dir_ / "catalog.toml").string());
  ASSERT_EQ(config.node.devices.catalog.size(), 1u);
  EXPECT_EQ(config.node.devices.catalog[0].id, "hall_light");
  EXPECT_EQ(config.node.devices.catalog[0].room, "hall");
  ASSERT_EQ(config.node.devices.routines.size(), 1u);
  EXPECT_EQ(config.node.devices.routines[0].id, "hall_on");
  EXPECT_EQ(config.node.devices.catalog_digest.size(), 32u);
  EXPECT_EQ(config.node.devices.leaders.poll_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(config.node.devices.leaders.down_after_failures, 3u);

  write_file(dir_ / "catalog.toml", "[[device]]\nid = \"hall_light\"\nkind = \"toaster\"\n");
  const std::string message = error_of(kMinimal + "[devices]\ncatalog = \"catalog.toml\"\n");
  EXPECT_THAT(message, HasSubstr("devices.catalog: the catalog is not valid"));
  EXPECT_THAT(message, HasSubstr((dir_ / "catalog.toml").string() + ":3: device hall_light.kind: unknown kind"));
  EXPECT_THAT(message, HasSubstr("device hall_light.location: missing"));
  EXPECT_THAT(error_of(kMinimal + "[devices]\nsubscription_renew_ms = 5000\nsubscription_lease_ms = 4000\n"),
              HasSubstr("must exceed devices.subscription_renew_ms"));
  EXPECT_THAT(error_of(kMinimal + "[devices]\npoll_interval_ms = 1\n"), HasSubstr("devices.poll_interval_ms"));
  // APEX §7.3: 0 trusts the driver's report; reads no closer than 10 ms.
  const AgentConfig trusting = parse(kMinimal + "[devices]\nactuation_stall_ms = 0\nactuation_check_ms = 100\n");
  EXPECT_EQ(trusting.node.devices.leaders.actuation_stall, std::chrono::milliseconds(0));
  EXPECT_EQ(trusting.node.devices.leaders.actuation_check_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(parse(kMinimal).node.devices.leaders.actuation_stall, std::chrono::seconds(5));
  EXPECT_THAT(error_of(kMinimal + "[devices]\nactuation_check_ms = 5\n"), HasSubstr("devices.actuation_check_ms"));
}

TEST_F(ConfigTest, RoutinesSection) {
  const AgentConfig config =
      parse(kMinimal + "[routines]\nlock_strategy = \"ola\"\nlock_renew_ms = 1000\nlock_reclaim_ms = 5000\n");
  EXPECT_EQ(config.node.routines.leaders.strategy, routine::LockStrategy::ola);
  EXPECT_EQ(config.node.routines.leaders.renew_interval, std::chrono::milliseconds(1000));
  EXPECT_EQ(config.node.devices.leaders.lock_reclaim_after, std::chrono::milliseconds(5000));
  EXPECT_EQ(parse(kMinimal).node.routines.leaders.strategy, routine::LockStrategy::sla);
  EXPECT_THAT(error_of(kMinimal + "[routines]\nlock_strategy = \"fifo\"\n"), HasSubstr("routines.lock_strategy"));
  EXPECT_EQ(parse(kMinimal + "[routines]\nlock_strategy = \"aggressive\"\n").node.routines.leaders.strategy,
            routine::LockStrategy::aggressive);
  EXPECT_EQ(parse(kMinimal).node.routines.leaders.visibility, routine::Visibility::ev);
  EXPECT_EQ(parse(kMinimal + "[routines]\nvisibility = \"psv\"\n").node.routines.leaders.visibility,
            routine::Visibility::psv);
  EXPECT_EQ(parse(kMinimal + "[routines]\nvisibility = \"gsv\"\n").node.routines.leaders.visibility,
            routine::Visibility::gsv);
  EXPECT_EQ(parse(kMinimal + "[routines]\nvisibility = \"wv\"\n").node.routines.leaders.visibility,
            routine::Visibility::wv);
  EXPECT_EQ(parse(kMinimal + "[routines]\nvisibility = \"ev\"\n").node.routines.leaders.visibility,
            routine::Visibility::ev);
  EXPECT_EQ(parse(kMinimal + "[routines]\nvisibility = \"sgsv\"\n").node.routines.leaders.visibility,
            routine::Visibility::sgsv);
  EXPECT_THAT(error_of(kMinimal + "[routines]\nvisibility = \"strict\"\n"),
              AllOf(HasSubstr("routines.visibility"), HasSubstr("\"gsv\"")));
  const auto defaults = parse(kMinimal).node.routines.leaders;
  EXPECT_EQ(defaults.ev_scheduler, routine::EvScheduler::tl);
  EXPECT_TRUE(defaults.ev_pre_lease);
  EXPECT_TRUE(defaults.ev_post_lease);
  const auto experiment =
      parse(kMinimal + "[routines]\nev_scheduler = \"jit\"\nev_pre_lease = false\nev_post_lease = false\n")
          .node.routines.leaders;
  EXPECT_EQ(experiment.ev_scheduler, routine::EvScheduler::jit);
  EXPECT_FALSE(experiment.ev_pre_lease);
  EXPECT_FALSE(experiment.ev_post_lease);
  EXPECT_THAT(error_of(kMinimal + "[routines]\nev_scheduler = \"lifo\"\n"),
              AllOf(HasSubstr("routines.ev_scheduler"), HasSubstr("\"tl\"")));
  EXPECT_THAT(error_of(kMinimal + "[routines]\nlock_renew_ms = 5000\nlock_reclaim_ms = 10000\n"),
              HasSubstr("at least three times routines.lock_renew_ms"));
  EXPECT_THAT(error_of(kMinimal + "[routines]\nola_backoff_min_ms = 900\nola_backoff_max_ms = 100\n"),
              HasSubstr("routines.ola_backoff_max_ms (100) is below"));
}

}  // namespace
}  // namespace mesh::agent
