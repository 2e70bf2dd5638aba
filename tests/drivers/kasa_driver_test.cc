// The Kasa driver over loopback TCP: against meshemu's emulated devices, and
// against a raw server that misbehaves in every way a device on a bad
// network can.
#include "agent/drivers/kasa_driver.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <gtest/gtest.h>

#include "agent/drivers/kasa_codec.h"
#include "tools/meshemu/emulator.h"

namespace mesh::drivers {
namespace {

using namespace std::chrono_literals;
using routine::Attributes;
using routine::DeviceKind;
using routine::DriverFailure;
using routine::DriverResult;

// Starts an operation and runs the loop until its callback ran (at most 10 s
// of wall time, a safety net: every driver deadline here is far shorter).
// Checks the callback ran once and not inside the starting call.
DriverResult run(asio::io_context& io, const std::function<void(routine::DeviceDriver::Callback)>& start) {
  std::optional<DriverResult> result;
  int calls = 0;
  start([&](const DriverResult& r) {
    result = r;
    ++calls;
  });
  EXPECT_FALSE(result.has_value()) << "the callback ran inside the call";
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!result && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_one_for(50ms);
  }
  // Let anything else that is ready run, to catch a second call.
  io.restart();
  io.poll();
  EXPECT_EQ(calls, 1);
  if (!result) return core::Unexpected(routine::DriverError{DriverFailure::timeout, "test gave up"});
  return *result;
}

std::unique_ptr<KasaDriver> driver_for(asio::io_context& io, DeviceKind kind, uint16_t port, std::string child = "",
                                       std::chrono::milliseconds timeout = 2000ms) {
  KasaDriver::Options options;
  options.timeout = timeout;
  return std::make_unique<KasaDriver>(io, kasa::Target{kind, std::move(child)}, "127.0.0.1", port, options);
}

class KasaEmulated : public ::testing::Test {
 protected:
  KasaEmulated() {
    meshemu::EmulatorConfig config;
    auto add = [&](std::string name, std::string kind) {
      meshemu::DeviceConfig device;
      device.name = std::move(name);
      device.kind = std::move(kind);
      config.devices.push_back(std::move(device));
    };
    add("plug", "plug");
    add("dimmer", "dimmer");
    add("bulb", "bulb");
    add("strip", "strip");
    add("motion", "motion_sensor");
    add("climate", "sensor");
    add("lock", "lock");
    add("thermostat", "thermostat");
    emulator_ = std::make_unique<meshemu::Emulator>(io_, std::move(config));
  }

  asio::io_context io_;
  std::unique_ptr<meshemu::Emulator> emulator_;
};

TEST_F(KasaEmulated, PlugOnOffWithCommandIds) {
  auto driver = driver_for(io_, DeviceKind::plug, emulator_->port("plug"));
  EXPECT_FALSE(driver->watch([](const DriverResult&) {}));
  auto state = run(io_, [&](auto cb) { driver->read(cb); });
  ASSERT_TRUE(state) << state.error().reason;
  EXPECT_EQ(*state, (Attributes{{"power", false}}));

  auto set = run(io_, [&](auto cb) { driver->actuate({{"power", true}}, "cmd-1", cb); });
  ASSERT_TRUE(set) << set.error().reason;
  EXPECT_EQ(*run(io_, [&](auto cb) { driver->read(cb); }), (Attributes{{"power", true}}));
  ASSERT_TRUE(run(io_, [&](auto cb) { driver->actuate({{"power", false}}, "", cb); }));
  EXPECT_EQ(emulator_->state("plug"), (Attributes{{"power", false}}));

  const auto& log = emulator_->actuations();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].device, "plug");
  EXPECT_EQ(log[0].command_id, "cmd-1");
  EXPECT_TRUE(log[0].ok);
  EXPECT_EQ(log[1].command_id, "");
}

TEST_F(KasaEmulated, DimmerBulbStripSensorsLockThermostat) {
  auto dimmer = driver_for(io_, DeviceKind::dimmer, emulator_->port("dimmer"));
  ASSERT_TRUE(run(io_, [&](auto cb) { dimmer->actuate({{"power", true}, {"brightness", 30.0}}, "", cb); }));
  EXPECT_EQ(*run(io_, [&](auto cb) { dimmer->read(cb); }), (Attributes{{"power", true}, {"brightness", 30.0}}));

  auto bulb = driver_for(io_, DeviceKind::bulb, emulator_->port("bulb"));
  auto after = run(io_, [&](auto cb) { bulb->actuate({{"power", true}, {"color_temp", 4000.0}}, "", cb); });
  ASSERT_TRUE(after) << after.error().reason;
  EXPECT_EQ(*after, (Attributes{{"power", true}, {"brightness", 100.0}, {"color_temp", 4000.0}}));
  ASSERT_TRUE(run(io_, [&](auto cb) { bulb->actuate({{"power", false}}, "", cb); }));
  EXPECT_EQ(*run(io_, [&](auto cb) { bulb->read(cb); }),
            (Attributes{{"power", false}, {"brightness", 100.0}, {"color_temp", 4000.0}}));

  auto outlet1 = driver_for(io_, DeviceKind::plug, emulator_->port("strip"), "01");
  auto outlet2 = driver_for(io_, DeviceKind::plug, emulator_->port("strip"), "02");
  ASSERT_TRUE(run(io_, [&](auto cb) { outlet1->actuate({{"power", true}}, "", cb); }));
  EXPECT_EQ(*run(io_, [&](auto cb) { outlet1->read(cb); }), (Attributes{{"power", true}}));
  EXPECT_EQ(*run(io_, [&](auto cb) { outlet2->read(cb); }), (Attributes{{"power", false}}));
  EXPECT_EQ(emulator_->state("strip"), (Attributes{{"outlet0", false}, {"outlet1", true}, {"outlet2", false}}));
  auto missing = driver_for(io_, DeviceKind::plug, emulator_->port("strip"), "07");
  auto no_outlet = run(io_, [&](auto cb) { missing->read(cb); });
  ASSERT_FALSE(no_outlet);
  EXPECT_EQ(no_outlet.error().failure, DriverFailure::protocol);

  auto motion = driver_for(io_, DeviceKind::motion_sensor, emulator_->port("motion"));
  EXPECT_EQ(*run(io_, [&](auto cb) { motion->read(cb); }), (Attributes{{"motion", false}}));
  ASSERT_TRUE(emulator_->set("motion", "motion", true));
  EXPECT_EQ(*run(io_, [&](auto cb) { motion->read(cb); }), (Attributes{{"motion", true}}));
  auto refused = run(io_, [&](auto cb) { motion->actuate({{"motion", false}}, "", cb); });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().failure, DriverFailure::refused);

  auto climate = driver_for(io_, DeviceKind::sensor, emulator_->port("climate"));
  ASSERT_TRUE(emulator_->set("climate", "temperature", 23.5));
  EXPECT_EQ(*run(io_, [&](auto cb) { climate->read(cb); }),
            (Attributes{{"temperature", 23.5}, {"humidity", 45.0}, {"illuminance", 300.0}}));

  auto lock = driver_for(io_, DeviceKind::lock, emulator_->port("lock"));
  ASSERT_TRUE(run(io_, [&](auto cb) { lock->actuate({{"locked", true}}, "", cb); }));
  EXPECT_EQ(*run(io_, [&](auto cb) { lock->read(cb); }), (Attributes{{"locked", true}}));

  auto thermostat = driver_for(io_, DeviceKind::thermostat, emulator_->port("thermostat"));
  ASSERT_TRUE(run(io_, [&](auto cb) { thermostat->actuate({{"target", 22.5}}, "", cb); }));
  EXPECT_EQ(*run(io_, [&](auto cb) { thermostat->read(cb); }), (Attributes{{"target", 22.5}, {"temperature", 21.0}}));
}

TEST_F(KasaEmulated, RequestsRunInOrder) {
  auto driver = driver_for(io_, DeviceKind::dimmer, emulator_->port("dimmer"));
  std::vector<std::string> order;
  std::vector<DriverResult> results;
  for (int level : {10, 20, 30}) {
    driver->actuate({{"brightness", static_cast<double>(level)}}, "", [&, level](const DriverResult& r) {
      order.push_back("set" + std::to_string(level));
      results.push_back(r);
    });
    driver->read([&](const DriverResult& r) {
      order.emplace_back("read");
      results.push_back(r);
    });
  }
  EXPECT_EQ(driver->pending(), 6u);
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (order.size() < 6 && std::chrono::steady_clock::now() < give_up) io_.run_one_for(50ms);
  EXPECT_EQ(order, (std::vector<std::string>{"set10", "read", "set20", "read", "set30", "read"}));
  ASSERT_EQ(results.size(), 6u);
  EXPECT_EQ(std::get<double>(results[1]->at("brightness")), 10.0);
  EXPECT_EQ(std::get<double>(results[3]->at("brightness")), 20.0);
  EXPECT_EQ(std::get<double>(results[5]->at("brightness")), 30.0);
}

TEST_F(KasaEmulated, DestroyedDriverRunsNoCallback) {
  auto driver = driver_for(io_, DeviceKind::plug, emulator_->port("plug"));
  int calls = 0;
  driver->read([&](const DriverResult&) { ++calls; });
  driver->actuate({{"power", true}}, "", [&](const DriverResult&) { ++calls; });
  // Under way (queued, connecting, sending), not finished: a request takes
  // more handlers than these.
  for (int i = 0; i < 3; ++i) io_.poll_one();
  ASSERT_EQ(calls, 0);
  driver.reset();
  io_.restart();
  io_.run_for(200ms);
  EXPECT_EQ(calls, 0);
}

TEST_F(KasaEmulated, CallbackMayDestroyTheDriver) {
  auto driver = driver_for(io_, DeviceKind::plug, emulator_->port("plug"));
  int calls = 0;
  driver->read([&](const DriverResult&) {
    ++calls;
    driver.reset();
  });
  driver->read([&](const DriverResult&) { ++calls; });
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (driver && std::chrono::steady_clock::now() < give_up) io_.run_one_for(50ms);
  io_.restart();
  io_.run_for(100ms);
  EXPECT_EQ(calls, 1);
}

TEST_F(KasaEmulated, SlowDeviceTimesOut) {
  asio::io_context io;
  meshemu::EmulatorConfig config;
  meshemu::DeviceConfig slow;
  slow.name = "slow";
  slow.kind = "plug";
  slow.reply_delay = 2000ms;
  config.devices.push_back(slow);
  meshemu::Emulator emulator(io, config);
  auto driver = driver_for(io, DeviceKind::plug, emulator.port("slow"), "", 150ms);
  auto result = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().failure, DriverFailure::timeout);
  EXPECT_NE(result.error().reason.find("waiting for the reply"), std::string::npos) << result.error().reason;
}

TEST(KasaDriverOpen, FromUri) {
  asio::io_context io;
  routine::DeviceSpec spec;
  spec.id = "strip_1";
  spec.kind = DeviceKind::plug;
  spec.driver = "kasa://10.0.0.7?child=01&timeout_ms=500";
  auto driver = KasaDriver::open(io, spec, *parse_driver_uri(spec.driver));
  ASSERT_TRUE(driver) << driver.error();
  EXPECT_EQ((*driver)->endpoint(), "10.0.0.7:9999#01");

  for (const char* bad : {"kasa://10.0.0.7/path", "kasa://h?chld=1", "kasa://h?timeout_ms=x", "kasa://h?child="}) {
    spec.driver = bad;
    auto error = KasaDriver::open(io, spec, *parse_driver_uri(bad));
    ASSERT_FALSE(error) << bad;
    EXPECT_NE(error.error().find(bad), std::string::npos) << error.error();
  }
  spec.kind = DeviceKind::bulb;
  spec.driver = "kasa://h?child=01";
  EXPECT_FALSE(KasaDriver::open(io, spec, *parse_driver_uri(spec.driver)));
  spec.driver = "kasa://[::1]:10000?transition_ms=300";
  auto bulb = KasaDriver::open(io, spec, *parse_driver_uri(spec.driver));
  ASSERT_TRUE(bulb) << bulb.error();
  EXPECT_EQ((*bulb)->endpoint(), "[::1]:10000");
}

// A TCP server that answers every connection with `behaviour`.
class RawServer {
 public:
  using Behaviour = std::function<void(std::shared_ptr<asio::ip::tcp::socket>)>;
  RawServer(asio::io_context& io, Behaviour behaviour)
      : acceptor_(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        behaviour_(std::move(behaviour)) {
    accept();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void accept() {
    auto socket = std::make_shared<asio::ip::tcp::socket>(acceptor_.get_executor());
    acceptor_.async_accept(*socket, [this, socket](const asio::error_code& error) {
      if (error) return;
      sockets_.push_back(socket);
      // Wait for the request's first bytes, then misbehave.
      auto buffer = std::make_shared<std::array<char, 1024>>();
      socket->async_read_some(asio::buffer(*buffer), [this, socket, buffer](const asio::error_code& e, size_t) {
        if (!e) behaviour_(socket);
      });
      accept();
    });
  }

  asio::ip::tcp::acceptor acceptor_;
  Behaviour behaviour_;
  std::vector<std::shared_ptr<asio::ip::tcp::socket>> sockets_;  // kept open
};

void send_and_close(const std::shared_ptr<asio::ip::tcp::socket>& socket, std::string bytes) {
  auto data = std::make_shared<std::string>(std::move(bytes));
  asio::async_write(*socket, asio::buffer(*data), [socket, data](const asio::error_code&, size_t) {
    asio::error_code ignored;
    socket->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket->close(ignored);
  });
}

struct Misbehaviour {
  const char* name;
  std::function<std::string()> reply;  // what the server sends before closing
  DriverFailure expected;
  const char* reason_part;
};

TEST(KasaMisbehaving, EveryFailureIsReportedWithAReason) {
  const std::string good = kasa::encode_frame(R"({"system":{"get_sysinfo":{"relay_state":1,"err_code":0}}})");
  const std::vector<Misbehaviour> cases = {
      {"closes at once", [] { return std::string(); }, DriverFailure::protocol, "without a reply"},
      {"half a header", [] { return std::string("\0\0", 2); }, DriverFailure::protocol, "header bytes"},
      {"partial frame", [good] { return good.substr(0, good.size() / 2); }, DriverFailure::protocol,
       "closed the connection after"},
      {"oversized length", [] { return std::string("\x7f\xff\xff\xff", 4) + "xxxx"; }, DriverFailure::protocol,
       "more than"},
      {"plain text", [] { return std::string("HTTP/1.1 400 Bad Request\r\n\r\n"); }, DriverFailure::protocol,
       "more than"},
      {"garbage payload", [] { return std::string("\0\0\0\x05hello", 9); }, DriverFailure::protocol, "not JSON"},
      {"wrong shape", [] { return kasa::encode_frame(R"({"system":{"get_sysinfo":[]}})"); }, DriverFailure::protocol,
       "get_sysinfo"},
      {"deep nesting", [] { return kasa::encode_frame(std::string(5000, '[') + std::string(5000, ']')); },
       DriverFailure::protocol, "deeper"},
      {"error code", [] { return kasa::encode_frame(R"({"system":{"get_sysinfo":{"err_code":-1,"err_msg":"no"}}})"); },
       DriverFailure::refused, "err_code -1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    asio::io_context io;
    RawServer server(io, [&](auto socket) { send_and_close(socket, c.reply()); });
    auto driver = driver_for(io, DeviceKind::plug, server.port(), "", 2000ms);
    auto result = run(io, [&](auto cb) { driver->read(cb); });
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().failure, c.expected) << result.error().reason;
    EXPECT_NE(result.error().reason.find(c.reason_part), std::string::npos) << result.error().reason;
    EXPECT_NE(result.error().reason.find("127.0.0.1:"), std::string::npos) << result.error().reason;
  }
}

TEST(KasaMisbehaving, ReplyInOneBytePiecesAndTrailingBytes) {
  const std::string good =
      kasa::encode_frame(R"({"system":{"get_sysinfo":{"relay_state":1,"err_code":0}}})") + "trailing junk";
  asio::io_context io;
  RawServer server(io, [&](std::shared_ptr<asio::ip::tcp::socket> socket) {
    socket->set_option(asio::ip::tcp::no_delay(true));
    for (char c : good) {
      asio::error_code ignored;
      asio::write(*socket, asio::buffer(&c, 1), ignored);
    }
  });
  auto driver = driver_for(io, DeviceKind::plug, server.port());
  auto result = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_TRUE(result) << result.error().reason;
  EXPECT_EQ(*result, (Attributes{{"power", true}}));
}

TEST(KasaMisbehaving, NeverAnswersTimesOut) {
  asio::io_context io;
  RawServer server(io, [](auto) {});  // reads the request, keeps the connection, says nothing
  auto driver = driver_for(io, DeviceKind::plug, server.port(), "", 100ms);
  auto result = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().failure, DriverFailure::timeout);
  // Queued behind a stuck request, the next one times out on its own deadline.
  int done = 0;
  driver->read([&](const DriverResult& r) { done += (!r && r.error().failure == DriverFailure::timeout) ? 1 : 100; });
  driver->read([&](const DriverResult& r) { done += (!r && r.error().failure == DriverFailure::timeout) ? 1 : 100; });
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (done < 2 && std::chrono::steady_clock::now() < give_up) io.run_one_for(50ms);
  EXPECT_EQ(done, 2);
  EXPECT_EQ(driver->pending(), 0u);
}

TEST(KasaMisbehaving, ConnectionRefusedIsUnreachable) {
  asio::io_context io;
  uint16_t port = 0;
  {
    asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = probe.local_endpoint().port();
  }
  auto driver = driver_for(io, DeviceKind::plug, port);
  auto result = run(io, [&](auto cb) { driver->read(cb); });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().failure, DriverFailure::unreachable);
  EXPECT_NE(result.error().reason.find("connect 127.0.0.1:"), std::string::npos) << result.error().reason;
}

TEST(KasaMisbehaving, UnresolvableHostIsUnreachable) {
  asio::io_context io;
  KasaDriver driver(io, {DeviceKind::plug, ""}, "no-such-host.invalid", 9999, {});
  auto result = run(io, [&](auto cb) { driver.read(cb); });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().failure, DriverFailure::unreachable);
  EXPECT_NE(result.error().reason.find("resolve"), std::string::npos) << result.error().reason;
}

}  // namespace
}  // namespace mesh::drivers
