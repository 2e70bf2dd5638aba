// meshemu: configuration, scripted and random sensors, the actuation log.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/drivers/kasa_driver.h"
#include "tools/meshemu/emulator.h"

namespace mesh::meshemu {
namespace {

using namespace std::chrono_literals;
using routine::Attributes;

DeviceConfig device(std::string name, std::string kind) {
  DeviceConfig out;
  out.name = std::move(name);
  out.kind = std::move(kind);
  return out;
}

TEST(MeshemuConfig, ExampleFileParses) {
  auto config = load_config(std::string(MESH_SOURCE_DIR) + "/tools/meshemu/example.toml");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->devices.size(), 11u);
  EXPECT_EQ(config->seed, 7u);
  EXPECT_EQ(config->actuation_log, "/tmp/meshemu-actuations.log");
  const auto& bulb = config->devices[3];
  EXPECT_EQ(bulb.kind, "bulb");
  EXPECT_EQ(bulb.initial, (Attributes{{"power", true}, {"brightness", 40.0}, {"color_temp", 2700.0}}));
  const auto& motion = config->devices[5];
  ASSERT_EQ(motion.timeline.size(), 3u);
  EXPECT_EQ(motion.timeline[1].at, 5.0);
  EXPECT_EQ(motion.timeline[1].values, (Attributes{{"motion", true}}));
  EXPECT_EQ(motion.repeat_after, 20.0);
}

TEST(MeshemuConfig, RelativeLogPathAndErrorsNameLineAndKey) {
  auto config =
      parse_config("actuation_log = \"a.log\"\n[[device]]\nname = \"p\"\nkind = \"plug\"\n", "x.toml", "/srv");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->actuation_log, "/srv/a.log");

  struct Case {
    const char* text;
    const char* expected;
  };
  for (const auto& c : std::initializer_list<Case>{
           {"[[device]]\nname = \"p\"\nkind = \"toaster\"\n", "x.toml:3: kind: unknown kind 'toaster'"},
           {"[[device]]\nname = \"p\"\nkind = \"plug\"\nbrightness = 3\n", "x.toml:4: brightness: unknown key"},
           {"[[device]]\nname = \"p\"\nkind = \"dimmer\"\nbrightness = 300\n", "x.toml:4: brightness:"},
           {"[[device]]\nname = \"p\"\nkind = \"plug\"\nport = 70000\n", "x.toml:4: port: must be an integer 0..65535"},
           {"[[device]]\nname = \"p\"\nkind = \"plug\"\nrandom_every = 1\n", "random_every: only sensors"},
           {"[[device]]\nname = \"m\"\nkind = \"motion_sensor\"\ntimeline = [{ motion = \"on\" }]\n",
            "a step needs at = SECONDS"},
           {"[[device]]\nname = \"m\"\nkind = \"motion_sensor\"\ntimeline = [{ at = 1, heat = 3 }]\n",
            "timeline.heat: not an attribute"},
           {"seeds = 3\n", "x.toml:1: seeds: unknown key"},
           {"seed = 3\n", "no [[device]]"},
           {"[[device]]\nkind = \"plug\"\n", "needs name"},
           {"[[device\n", "x.toml:1:"},
       }) {
    auto error = parse_config(c.text, "x.toml", ".");
    ASSERT_FALSE(error) << c.text;
    EXPECT_NE(error.error().find(c.expected), std::string::npos) << error.error();
  }
}

TEST(MeshemuConfig, DeviceOption) {
  auto device = parse_device_option("strip:kitchen:9905");
  ASSERT_TRUE(device) << device.error();
  EXPECT_EQ(device->kind, "strip");
  EXPECT_EQ(device->name, "kitchen");
  EXPECT_EQ(device->port, 9905);
  auto v6 = parse_device_option("plug:lamp:0:::1");
  ASSERT_TRUE(v6) << v6.error();
  EXPECT_EQ(v6->address, "::1");
  EXPECT_FALSE(parse_device_option("plug:lamp"));
  EXPECT_FALSE(parse_device_option("toaster:x:1"));
  EXPECT_FALSE(parse_device_option("plug:x:99999"));
}

TEST(Meshemu, TimelinePlaysAndRepeats) {
  asio::io_context io;
  EmulatorConfig config;
  DeviceConfig motion;
  motion.name = "m";
  motion.kind = "motion_sensor";
  motion.timeline = {{0.0, {{"motion", true}}}, {0.05, {{"motion", false}}}};
  motion.repeat_after = 0.1;
  config.devices.push_back(motion);
  Emulator emulator(io, config);
  // One timer firing per run_one() (nothing else is ready): step by step
  // rather than by elapsed time.
  io.run_one();
  EXPECT_EQ(emulator.state("m"), (Attributes{{"motion", true}}));
  io.run_one();
  EXPECT_EQ(emulator.state("m"), (Attributes{{"motion", false}}));
  io.run_one();  // the second cycle's first step
  EXPECT_EQ(emulator.state("m"), (Attributes{{"motion", true}}));
}

Attributes random_run(uint64_t seed) {
  asio::io_context io;
  EmulatorConfig config;
  config.seed = seed;
  DeviceConfig climate;
  climate.name = "c";
  climate.kind = "sensor";
  climate.random_every = 0.01;
  config.devices.push_back(climate);
  Emulator emulator(io, config);
  // Count ticks rather than time, so two runs see the same number of changes.
  for (int i = 0; i < 20; ++i) io.run_one();
  return emulator.state("c");
}

TEST(Meshemu, RandomChangesFollowTheSeed) {
  const auto a = random_run(3);
  EXPECT_EQ(a, random_run(3));
  EXPECT_NE(a, (Attributes{{"temperature", 21.0}, {"humidity", 45.0}, {"illuminance", 300.0}}));
  for (const auto& [name, value] : a) {
    const double v = std::get<double>(value);
    if (name == "temperature") {
      EXPECT_TRUE(v >= 15 && v <= 30);
    } else if (name == "humidity") {
      EXPECT_TRUE(v >= 20 && v <= 80);
    } else {
      EXPECT_TRUE(v >= 0 && v <= 1000);
    }
  }
}

TEST(Meshemu, HandlesRequestsLikeADevice) {
  asio::io_context io;
  EmulatorConfig config;
  config.devices.push_back(device("p", "plug"));
  config.devices.push_back(device("s", "strip"));
  Emulator emulator(io, config);
  EXPECT_FALSE(emulator.handle("p", "not json"));
  EXPECT_FALSE(emulator.handle("p", "[1]"));
  EXPECT_FALSE(emulator.handle("p", std::string(100, '{')));
  auto reply = nlohmann::json::parse(*emulator.handle(
      "p", R"({"system":{"set_relay_state":{"state":7},"reboot":{}},"emeter":{"get_realtime":{}},"x":1})"));
  EXPECT_EQ(reply["system"]["set_relay_state"]["err_code"], -3);
  EXPECT_EQ(reply["system"]["reboot"]["err_code"], -2);
  EXPECT_EQ(reply["emeter"]["err_code"], -1);
  EXPECT_EQ(reply["x"]["err_code"], -1);
  ASSERT_EQ(emulator.actuations().size(), 1u);
  EXPECT_FALSE(emulator.actuations()[0].ok);

  auto strip = nlohmann::json::parse(
      *emulator.handle("s", R"({"context":{"child_ids":["09"]},"system":{"set_relay_state":{"state":1}}})"));
  EXPECT_EQ(strip["system"]["set_relay_state"]["err_code"], -14);
  emulator.handle("s", R"({"system":{"set_relay_state":{"state":1}}})");
  EXPECT_EQ(emulator.state("s"), (Attributes{{"outlet0", true}, {"outlet1", true}, {"outlet2", true}}));
}

TEST(Meshemu, ActuationLogIsJsonLines) {
  const auto path = std::filesystem::temp_directory_path() / ("meshemu_test_" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(path);
  {
    asio::io_context io;
    EmulatorConfig config;
    config.actuation_log = path.string();
    config.devices.push_back(device("lamp", "dimmer"));
    Emulator emulator(io, config);
    emulator.handle("lamp", R"({"system":{"get_sysinfo":{}}})");
    emulator.handle("lamp",
                    R"({"smartlife.iot.dimmer":{"set_brightness":{"brightness":5}},"meshagent":{"command_id":"c-1"}})");
    emulator.handle("lamp", R"({"system":{"set_relay_state":{"state":1}}})");
  }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["device"], "lamp");
  EXPECT_EQ(lines[0]["command_id"], "c-1");
  EXPECT_EQ(lines[0]["ok"], true);
  EXPECT_EQ(lines[0]["command"]["smartlife.iot.dimmer"]["set_brightness"]["brightness"], 5);
  EXPECT_TRUE(lines[0]["mono_s"].is_number());
  EXPECT_EQ(lines[0]["wall"].get<std::string>().size(), 24u);
  EXPECT_TRUE(lines[1]["command_id"].is_null());
  std::filesystem::remove(path);
}

TEST(Meshemu, StartupErrorsNameTheDevice) {
  asio::io_context io;
  EmulatorConfig config;
  config.devices.push_back(device("a", "plug"));
  Emulator first(io, config);
  EmulatorConfig clash;
  DeviceConfig same_port = device("b", "plug");
  same_port.port = first.port("a");
  clash.devices.push_back(same_port);
  try {
    Emulator second(io, clash);
    ADD_FAILURE() << "bound a port in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("device b: cannot listen on"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mesh::meshemu

// The meshemu program end to end: starts, prints its endpoints, answers the
// Kasa driver, logs the actuation, exits 0 on SIGTERM.
namespace mesh::meshemu {
namespace {

TEST(MeshemuProgram, ServesTheKasaDriverAndLogs) {
  const auto dir = std::filesystem::temp_directory_path() / ("meshemu_program_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / "stdout.txt";
  const auto log = dir / "actuations.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* redirected = std::freopen(out.c_str(), "w", stdout);
    (void)redirected;
    ::execl(MESHEMU_BINARY, "meshemu", "--device", "plug:lamp:0", "--log", log.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ASSERT_GT(pid, 0);
  std::string text;
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (text.find("ready\n") == std::string::npos && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
    std::ifstream in(out);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_NE(text.find("ready\n"), std::string::npos) << text;
  const auto colon = text.find("lamp plug 127.0.0.1:");
  ASSERT_NE(colon, std::string::npos) << text;
  const auto port = static_cast<uint16_t>(std::stoi(text.substr(colon + 20)));

  asio::io_context io;
  drivers::KasaDriver driver(io, {routine::DeviceKind::plug, ""}, "127.0.0.1", port, {});
  std::optional<routine::DriverResult> result;
  driver.actuate({{"power", true}}, "cmd-42", [&](const routine::DriverResult& r) { result = r; });
  while (!result && std::chrono::steady_clock::now() < give_up) io.run_one_for(50ms);
  ASSERT_TRUE(result && *result) << (result ? result->error().reason : "no answer");

  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(log);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto entry = nlohmann::json::parse(line);
  EXPECT_EQ(entry["device"], "lamp");
  EXPECT_EQ(entry["command_id"], "cmd-42");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mesh::meshemu
