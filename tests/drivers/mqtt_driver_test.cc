// The MQTT driver against a real broker: Debian's mosquitto, started by the
// test on a free loopback port, with mosquitto_pub / mosquitto_sub playing
// the devices (zigbee2mqtt and Tasmota conventions). Skips, saying why, if
// the broker or the clients are not installed.
#include "agent/drivers/mqtt_driver.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <gtest/gtest.h>

#include "agent/drivers/driver_factory.h"

namespace mesh::drivers {
namespace {

using namespace std::chrono_literals;
using routine::Attributes;
using routine::DeviceKind;
using routine::DriverFailure;
using routine::DriverResult;
namespace fs = std::filesystem;

std::optional<std::string> find_program(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin", "/bin"}) {
    const fs::path path = fs::path(dir) / name;
    if (::access(path.c_str(), X_OK) == 0) return path.string();
  }
  return std::nullopt;
}

// Runs `argv` with stdout and stderr to `output` (or /dev/null); returns its pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& output = "/dev/null") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* out = std::freopen(output.c_str(), "a", stdout);
    (void)out;
    ::dup2(::fileno(stdout), 2);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void stop(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  wait_for(pid);
  pid = -1;
}

uint16_t free_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return probe.local_endpoint().port();
}

bool port_open(uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  asio::error_code error;
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), error);
  return !error;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the loop until `done()` or `limit` of wall time (a safety net).
bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    io.restart();
    if (io.run_one_for(20ms) == 0) std::this_thread::sleep_for(1ms);
  }
  return true;
}

class MqttBroker : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = find_program("mosquitto");
    pub_ = find_program("mosquitto_pub");
    sub_ = find_program("mosquitto_sub");
    if (!broker_ || !pub_ || !sub_) {
      GTEST_SKIP() << "mosquitto, mosquitto_pub or mosquitto_sub is not installed "
                      "(Debian packages mosquitto, mosquitto-clients; scripts/setup installs them)";
    }
    dir_ = fs::temp_directory_path() / ("meshagent_mqtt_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    port_ = free_port();
  }

  void TearDown() override {
    for (auto& pid : subscribers_) stop(pid);
    stop(broker_pid_);
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void start_broker(const std::string& extra = "allow_anonymous true\n") {
    std::ofstream(dir_ / "mosquitto.conf") << "listener " << port_ << " 127.0.0.1\npersistence false\n" << extra;
    broker_pid_ = spawn({*broker_, "-c", (dir_ / "mosquitto.conf").string()}, (dir_ / "broker.log").string());
    const auto give_up = std::chrono::steady_clock::now() + 5s;
    while (!port_open(port_) && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(port_open(port_)) << "mosquitto did not start: " << read_file(dir_ / "broker.log");
  }

  void publish(const std::string& topic, const std::string& payload, bool retain = false) {
    std::vector<std::string> argv = {*pub_, "-h",  "127.0.0.1", "-p",   std::to_string(port_), "-q", "1",
                                     "-t",  topic, "-m",        payload};
    if (retain) argv.emplace_back("-r");
    argv.insert(argv.end(), client_args_.begin(), client_args_.end());
    ASSERT_EQ(wait_for(spawn(argv)), 0) << "mosquitto_pub " << topic;
  }

  // Starts mosquitto_sub on `topic`, printing "topic payload" lines to a
  // file, and returns once it is subscribed (it has seen a probe message).
  fs::path subscribe(asio::io_context& io, const std::string& topic) {
    fs::path out = dir_ / ("sub_" + std::to_string(subscribers_.size()) + ".txt");
    const std::string probe = "meshtest/probe/" + std::to_string(subscribers_.size());
    std::vector<std::string> argv = {*sub_, "-h",  "127.0.0.1", "-p", std::to_string(port_), "-v", "-q", "1",
                                     "-t",  topic, "-t",        probe};
    argv.insert(argv.end(), client_args_.begin(), client_args_.end());
    subscribers_.push_back(spawn(argv, out.string()));
    const bool ready = run_until(io, [&] {
      publish(probe, "x");
      return read_file(out).find(probe) != std::string::npos;
    });
    EXPECT_TRUE(ready) << "mosquitto_sub did not subscribe";
    return out;
  }

  std::optional<std::string> broker_, pub_, sub_;
  fs::path dir_;
  uint16_t port_ = 0;
  pid_t broker_pid_ = -1;
  std::vector<pid_t> subscribers_;
  std::vector<std::string> client_args_;  // extra arguments of mosquitto_pub/_sub (TLS)
};

routine::DeviceSpec spec(const std::string& id, DeviceKind kind, const std::string& uri) {
  routine::DeviceSpec device;
  device.id = id;
  device.kind = kind;
  device.driver = uri;
  return device;
}

std::unique_ptr<MqttDriver> open(asio::io_context& io, MqttBrokers& brokers, const routine::DeviceSpec& device) {
  auto uri = parse_driver_uri(device.driver);
  EXPECT_TRUE(uri) << uri.error();
  auto driver = MqttDriver::open(io, brokers, device, *uri);
  EXPECT_TRUE(driver) << driver.error();
  return driver ? std::move(*driver) : nullptr;
}

struct Watched {
  std::vector<DriverResult> results;
  routine::DeviceDriver::Callback callback() {
    return [this](const DriverResult& r) { results.push_back(r); };
  }
  bool has_state(const Attributes& state) const {
    for (const auto& r : results) {
      if (r && *r == state) return true;
    }
    return false;
  }
  bool has_failure(DriverFailure failure) const {
    for (const auto& r : results) {
      if (!r && r.error().failure == failure) return true;
    }
    return false;
  }
};

// Starts an operation and runs the loop until its callback ran once.
std::optional<DriverResult> run(asio::io_context& io, const std::function<void(routine::DeviceDriver::Callback)>& start,
                                const std::function<void()>& meanwhile = {}) {
  std::optional<DriverResult> result;
  int calls = 0;
  start([&](const DriverResult& r) {
    result = r;
    ++calls;
  });
  EXPECT_FALSE(result) << "the callback ran inside the call";
  run_until(io, [&] {
    if (meanwhile) meanwhile();
    return result.has_value();
  });
  EXPECT_EQ(calls, 1);
  return result;
}

TEST_F(MqttBroker, Z2mStateInCommandsOut) {
  start_broker();
  asio::io_context io;
  MqttBrokers brokers(io);
  const std::string uri = "z2m://127.0.0.1:" + std::to_string(port_) + "/zigbee2mqtt/lamp";
  auto driver = open(io, brokers, spec("lamp", DeviceKind::dimmer, uri));
  ASSERT_TRUE(driver);
  Watched watched;
  EXPECT_TRUE(driver->watch(watched.callback()));
  ASSERT_TRUE(run_until(io, [&] { return driver->connection().subscribed(); })) << driver->connection().last_error();

  // State in (retained, as zigbee2mqtt can be configured to publish it).
  publish("zigbee2mqtt/lamp", R"({"state":"OFF","brightness":127,"linkquality":60})", true);
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", false}, {"brightness", 50.0}}); }));
  auto read = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_TRUE(read && *read);
  EXPECT_EQ(**read, (Attributes{{"power", false}, {"brightness", 50.0}}));

  // Command out; the device answers with its new state.
  const auto commands = subscribe(io, "zigbee2mqtt/lamp/set");
  bool answered = false;
  auto set = run(
      io,
      [&](auto cb) {
        driver->actuate({{"power", true}, {"brightness", 100.0}}, "", cb);
      },
      [&] {
        if (!answered &&
            read_file(commands).find(R"(zigbee2mqtt/lamp/set {"brightness":254,"state":"ON"})") != std::string::npos) {
          answered = true;
          publish("zigbee2mqtt/lamp", R"({"state":"ON","brightness":254})");
        }
      });
  ASSERT_TRUE(set);
  ASSERT_TRUE(*set) << set->error().reason;
  EXPECT_EQ(**set, (Attributes{{"power", true}, {"brightness", 100.0}}));
  EXPECT_TRUE(watched.has_state({{"power", true}, {"brightness", 100.0}}));

  // Availability.
  publish("zigbee2mqtt/lamp/availability", "offline");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_failure(DriverFailure::unreachable); }));
  auto offline = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_TRUE(offline && !*offline);
  EXPECT_EQ((*offline).error().failure, DriverFailure::unreachable);
  publish("zigbee2mqtt/lamp/availability", R"({"state":"online"})");
  publish("zigbee2mqtt/lamp", R"({"state":"OFF","brightness":254})");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", false}, {"brightness", 100.0}}); }));
}

TEST_F(MqttBroker, Z2mReadAsksTheDeviceAndActuationTimesOut) {
  start_broker();
  asio::io_context io;
  MqttBrokers brokers(io);
  const std::string uri = "z2m://127.0.0.1:" + std::to_string(port_) + "/home/z2m/desk?timeout_ms=3000";
  auto driver = open(io, brokers, spec("desk", DeviceKind::plug, uri));
  ASSERT_TRUE(driver);
  ASSERT_TRUE(run_until(io, [&] { return driver->connection().subscribed(); }));
  const auto gets = subscribe(io, "home/z2m/desk/get");
  bool answered = false;
  auto read = run(
      io, [&](auto cb) { driver->read(cb); },
      [&] {
        if (!answered && read_file(gets).find(R"(home/z2m/desk/get {"state":""})") != std::string::npos) {
          answered = true;
          publish("home/z2m/desk", R"({"state":"ON"})");
        }
      });
  ASSERT_TRUE(read && *read) << (read ? read->error().reason : "no result");
  EXPECT_EQ(**read, (Attributes{{"power", true}}));

  auto quick = open(io, brokers, spec("desk2", DeviceKind::plug, uri.substr(0, uri.find('?')) + "2?timeout_ms=200"));
  EXPECT_EQ(brokers.live(), 1u) << "devices on one broker share a connection";
  auto timeout = run(io, [&](auto cb) { quick->actuate({{"power", false}}, "", cb); });
  ASSERT_TRUE(timeout && !*timeout);
  EXPECT_EQ((*timeout).error().failure, DriverFailure::timeout);
  auto refused = run(io, [&](auto cb) { quick->actuate({{"brightness", 5.0}}, "", cb); });
  ASSERT_TRUE(refused && !*refused);
  EXPECT_EQ((*refused).error().failure, DriverFailure::refused);
}

TEST_F(MqttBroker, TasmotaStateInCommandsOut) {
  start_broker();
  asio::io_context io;
  MqttBrokers brokers(io);
  const std::string base = "tasmota://127.0.0.1:" + std::to_string(port_);
  auto plug = open(io, brokers, spec("kettle", DeviceKind::plug, base + "/sonoff_kettle"));
  auto climate = open(io, brokers, spec("climate", DeviceKind::sensor, base + "/th16"));
  ASSERT_TRUE(plug && climate);
  Watched watched;
  Watched climate_watched;
  plug->watch(watched.callback());
  climate->watch(climate_watched.callback());
  ASSERT_TRUE(run_until(io, [&] { return plug->connection().subscribed(); }));

  publish("stat/sonoff_kettle/POWER", "ON");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", true}}); }));
  publish("tele/th16/SENSOR", R"({"Time":"2026-11-25T01:50:00","SI7021":{"Temperature":22.4,"Humidity":51.0}})");
  ASSERT_TRUE(run_until(io, [&] { return climate_watched.has_state({{"temperature", 22.4}, {"humidity", 51.0}}); }));

  const auto commands = subscribe(io, "cmnd/sonoff_kettle/POWER");
  bool answered = false;
  auto set = run(
      io,
      [&](auto cb) {
        plug->actuate({{"power", false}}, "", cb);
      },
      [&] {
        if (!answered && read_file(commands).find("cmnd/sonoff_kettle/POWER OFF") != std::string::npos) {
          answered = true;
          publish("stat/sonoff_kettle/RESULT", R"({"POWER":"OFF"})");
        }
      });
  ASSERT_TRUE(set && *set) << (set ? set->error().reason : "no result");
  EXPECT_EQ(**set, (Attributes{{"power", false}}));

  publish("tele/sonoff_kettle/LWT", "Offline");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_failure(DriverFailure::unreachable); }));
}

TEST_F(MqttBroker, BrokerRestartIsSurvived) {
  start_broker();
  asio::io_context io;
  MqttBrokers brokers(io);
  auto driver = open(io, brokers,
                     spec("lamp", DeviceKind::plug, "z2m://127.0.0.1:" + std::to_string(port_) + "/zigbee2mqtt/lamp"));
  ASSERT_TRUE(driver);
  Watched watched;
  driver->watch(watched.callback());
  ASSERT_TRUE(run_until(io, [&] { return driver->connection().subscribed(); }));
  publish("zigbee2mqtt/lamp", R"({"state":"ON"})");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", true}}); }));

  stop(broker_pid_);
  ASSERT_TRUE(run_until(io, [&] { return watched.has_failure(DriverFailure::unreachable); }));
  EXPECT_FALSE(driver->connection().connected());
  auto down = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_TRUE(down && !*down);
  EXPECT_EQ((*down).error().failure, DriverFailure::unreachable);
  EXPECT_NE((*down).error().reason.find("broker not connected"), std::string::npos) << (*down).error().reason;
  // Let a few reconnect attempts fail against the dead port.
  run_until(
      io, [] { return false; }, 600ms);

  start_broker();
  ASSERT_TRUE(run_until(
      io, [&] { return driver->connection().subscribed(); }, 8000ms))
      << driver->connection().last_error();
  EXPECT_EQ(driver->connection().connects(), 2u);
  // The subscription was renewed: state published after the restart arrives.
  publish("zigbee2mqtt/lamp", R"({"state":"OFF"})");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", false}}); }));
}

TEST_F(MqttBroker, UsernameAndPassword) {
  const auto passwd = find_program("mosquitto_passwd");
  if (!passwd) GTEST_SKIP() << "mosquitto_passwd is not installed";
  std::ofstream(dir_ / "users").close();
  ASSERT_EQ(wait_for(spawn({*passwd, "-b", (dir_ / "users").string(), "mesh", "s3cret"})), 0);
  start_broker("allow_anonymous false\npassword_file " + (dir_ / "users").string() + "\n");
  std::ofstream(dir_ / "good.pw") << "s3cret\n";
  std::ofstream(dir_ / "bad.pw") << "wrong\n";

  asio::io_context io;
  MqttBrokers brokers(io);
  const std::string base = "z2m://127.0.0.1:" + std::to_string(port_) + "/zigbee2mqtt/lamp?user=mesh&password_file=";
  auto good = open(io, brokers, spec("good", DeviceKind::plug, base + (dir_ / "good.pw").string()));
  auto bad = open(io, brokers, spec("bad", DeviceKind::plug, base + (dir_ / "bad.pw").string()));
  ASSERT_TRUE(good && bad);
  EXPECT_EQ(brokers.live(), 2u) << "other credentials, other connection";
  ASSERT_TRUE(run_until(io, [&] { return good->connection().connected(); }));
  ASSERT_TRUE(run_until(io, [&] { return bad->connection().last_error().find("not authori") != std::string::npos; }))
      << bad->connection().last_error();
  EXPECT_FALSE(bad->connection().connected());
}

TEST_F(MqttBroker, Tls) {
  const auto openssl = find_program("openssl");
  if (!openssl) GTEST_SKIP() << "openssl is not installed (needed to make the test's certificates)";
  auto run_openssl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), *openssl);
    return wait_for(spawn(args, (dir_ / "openssl.log").string()));
  };
  const std::string d = dir_.string() + "/";
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  ASSERT_EQ(run_openssl(with({"req", "-x509", "-days", "2", "-subj", "/CN=meshtest-ca", "-keyout", d + "ca.key", "-out",
                              d + "ca.pem"},
                             ec)),
            0);
  ASSERT_EQ(run_openssl(with({"req", "-x509", "-days", "2", "-subj", "/CN=other-ca", "-keyout", d + "other.key", "-out",
                              d + "other.pem"},
                             ec)),
            0);
  ASSERT_EQ(
      run_openssl(with({"req", "-subj", "/CN=127.0.0.1", "-keyout", d + "server.key", "-out", d + "server.csr"}, ec)),
      0);
  std::ofstream(dir_ / "san.ext") << "subjectAltName=IP:127.0.0.1\n";
  ASSERT_EQ(run_openssl({"x509", "-req", "-days", "2", "-in", d + "server.csr", "-CA", d + "ca.pem", "-CAkey",
                         d + "ca.key", "-CAcreateserial", "-out", d + "server.pem", "-extfile", d + "san.ext"}),
            0)
      << read_file(dir_ / "openssl.log");
  // mosquitto started as root reads its files as the mosquitto user.
  fs::permissions(dir_ / "server.key", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  start_broker("allow_anonymous true\ncafile " + d + "ca.pem\ncertfile " + d + "server.pem\nkeyfile " + d +
               "server.key\n");
  client_args_ = {"--cafile", d + "ca.pem"};

  asio::io_context io;
  MqttBrokers brokers(io);
  const std::string base = "z2m://127.0.0.1:" + std::to_string(port_) + "/zigbee2mqtt/lamp?ca=";
  auto driver = open(io, brokers, spec("lamp", DeviceKind::plug, base + d + "ca.pem"));
  auto untrusted = open(io, brokers, spec("lamp2", DeviceKind::plug, base + d + "other.pem"));
  ASSERT_TRUE(driver && untrusted);
  EXPECT_EQ(driver->connection().settings().describe(), "mqtts://127.0.0.1:" + std::to_string(port_));
  Watched watched;
  driver->watch(watched.callback());
  ASSERT_TRUE(run_until(io, [&] { return driver->connection().subscribed(); })) << driver->connection().last_error();
  publish("zigbee2mqtt/lamp", R"({"state":"ON"})");
  ASSERT_TRUE(run_until(io, [&] { return watched.has_state({{"power", true}}); }));

  const auto commands = subscribe(io, "zigbee2mqtt/lamp/set");
  bool answered = false;
  auto set = run(
      io,
      [&](auto cb) {
        driver->actuate({{"power", false}}, "", cb);
      },
      [&] {
        if (!answered && read_file(commands).find(R"(zigbee2mqtt/lamp/set {"state":"OFF"})") != std::string::npos) {
          answered = true;
          publish("zigbee2mqtt/lamp", R"({"state":"OFF"})");
        }
      });
  ASSERT_TRUE(set && *set) << (set ? set->error().reason : "no result");
  EXPECT_EQ(**set, (Attributes{{"power", false}}));
  // A broker whose certificate the CA does not sign is never trusted.
  EXPECT_FALSE(untrusted->connection().connected());
  EXPECT_FALSE(untrusted->connection().last_error().empty());
}

TEST(MqttDriverOpen, UriErrors) {
  asio::io_context io;
  MqttBrokers brokers(io);
  for (const char* bad :
       {"z2m://127.0.0.1/onlyname", "tasmota://127.0.0.1", "z2m://127.0.0.1/z/a?qos=2", "z2m://127.0.0.1/z/a?colour=1",
        "z2m://127.0.0.1/z/+?x", "z2m://127.0.0.1/z/a?cert=/c", "z2m://127.0.0.1/z/a?password_file=/p",
        "z2m://127.0.0.1/z/a?user=u&password_file=/nonexistent"}) {
    auto uri = parse_driver_uri(bad);
    ASSERT_TRUE(uri) << bad;
    auto driver = MqttDriver::open(io, brokers, spec("d", DeviceKind::plug, bad), *uri);
    ASSERT_FALSE(driver) << bad;
    EXPECT_NE(driver.error().find(bad), std::string::npos) << driver.error();
  }
  auto lock_uri = parse_driver_uri("tasmota://127.0.0.1/door");
  EXPECT_FALSE(MqttDriver::open(io, brokers, spec("door", DeviceKind::lock, "tasmota://127.0.0.1/door"), *lock_uri));
}

TEST(AgentDriverFactory, DispatchesOnTheScheme) {
  asio::io_context io;
  AgentDriverFactory factory(io);
  auto kasa = factory.open(spec("lamp", DeviceKind::plug, "kasa://127.0.0.1:9999"));
  ASSERT_TRUE(kasa) << kasa.error();
  EXPECT_FALSE((*kasa)->watch([](const DriverResult&) {}));
  auto z2m = factory.open(spec("hall", DeviceKind::bulb, "z2m://127.0.0.1:1/zigbee2mqtt/hall"));
  ASSERT_TRUE(z2m) << z2m.error();
  EXPECT_TRUE((*z2m)->watch([](const DriverResult&) {}));
  auto tasmota = factory.open(spec("kettle", DeviceKind::plug, "tasmota://127.0.0.1:1/kettle"));
  ASSERT_TRUE(tasmota) << tasmota.error();
  EXPECT_EQ(factory.brokers().live(), 1u);

  auto unknown = factory.open(spec("x", DeviceKind::plug, "zwave://10.0.0.1/3"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(),
            "device x: driver URI 'zwave://10.0.0.1/3': unknown scheme 'zwave' (known: kasa, z2m, tasmota)");
  auto malformed = factory.open(spec("y", DeviceKind::plug, "kasa:/10.0.0.1"));
  ASSERT_FALSE(malformed);
  EXPECT_NE(malformed.error().find("device y: driver URI 'kasa:/10.0.0.1'"), std::string::npos) << malformed.error();

  // A broker that is down: reads fail as unreachable, at once, never inside the call.
  auto result = run(io, [&](auto cb) { (*z2m)->read(cb); });
  ASSERT_TRUE(result && !*result);
  EXPECT_EQ((*result).error().failure, DriverFailure::unreachable);
}

}  // namespace
}  // namespace mesh::drivers
