#pragma once

// meshemu's devices: TP-Link Kasa devices emulated over the real protocol
// (agent/drivers/kasa_codec.h), one TCP listener per device, on one asio
// thread. See meshemu --help for the configuration format.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "core/expected.h"
#include "routine/device_model.h"

namespace mesh::meshemu {

// What one emulated device is. `kind` is a device-model kind name or
// "strip" (a power strip: `outlets` plugs behind one endpoint).
struct DeviceConfig {
  std::string name;
  std::string kind;
  std::string address;  // empty: the emulator's default address
  uint16_t port = 0;    // 0: any free port (tests)
  int outlets = 3;      // strips: 1..16
  // Initial state: attribute name (device model) -> value.
  routine::Attributes initial;
  // Scripted sensor values: at `at` seconds after start, set `values`; the
  // timeline repeats every `repeat_after` seconds when that is > 0.
  struct Step {
    double at = 0;
    routine::Attributes values;
  };
  std::vector<Step> timeline;
  double repeat_after = 0;
  // Random sensor changes every this many seconds (0: none), from the
  // emulator's seed: on/off attributes flip with probability 1/2, numbers
  // take a bounded random walk.
  double random_every = 0;
  // Replies are delayed this long (emulates a slow device; a delay beyond
  // the driver's timeout is a device that never answers).
  std::chrono::milliseconds reply_delay{0};
};

struct EmulatorConfig {
  std::string address = "127.0.0.1";
  std::string actuation_log;  // empty: no log file
  uint64_t seed = 1;
  std::vector<DeviceConfig> devices;
};

// Parses the TOML configuration; relative paths resolve against `base_dir`.
// Errors name the source, the line and the key.
core::Expected<EmulatorConfig, std::string> parse_config(std::string_view toml_text, std::string_view source_name,
                                                         std::string_view base_dir);
core::Expected<EmulatorConfig, std::string> load_config(const std::string& path);
// One device from the command line: KIND:NAME:PORT[:ADDRESS].
core::Expected<DeviceConfig, std::string> parse_device_option(std::string_view text);
// The kinds meshemu emulates, for help texts and errors.
std::vector<std::string> emulated_kinds();

// One actuation, as logged.
struct Actuation {
  double monotonic_s = 0;  // since the emulator started
  std::string wall;        // ISO 8601 UTC with milliseconds
  std::string device;
  std::string command_id;  // empty if the request carried none
  std::string command;     // the request JSON
  bool ok = false;         // every setter in it succeeded
};

class Emulator {
 public:
  // Binds every device's endpoint and opens the actuation log (append).
  // Throws std::runtime_error naming the device and the cause (port in use,
  // unknown kind, log not writable): a start-up error.
  Emulator(asio::io_context& io, EmulatorConfig config);
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;
  ~Emulator();

  // The port `device` listens on (after binding port 0).
  uint16_t port(const std::string& device) const;
  // Device names in configuration order.
  std::vector<std::string> devices() const;
  // Every actuation so far, in order.
  const std::vector<Actuation>& actuations() const { return actuations_; }
  // Requests answered (any kind) per device.
  uint64_t requests(const std::string& device) const;

  // The device's state in the device model's attributes (a strip: "power" of
  // outlet i as "outlet<i>").
  routine::Attributes state(const std::string& device) const;
  // Sets a state attribute directly, as the physical world would (a sensor
  // reading, someone pressing the button). False for an unknown device or
  // attribute.
  bool set(const std::string& device, const std::string& attribute, const routine::Value& value);

  // Answers one request (plain JSON) for `device`, applying it: the reply
  // JSON, or nullopt when the request is not a JSON object (the connection
  // is then closed, as a real device does).
  std::optional<std::string> handle(const std::string& device, std::string_view request);

  // One line per device: "NAME KIND ADDRESS:PORT".
  std::vector<std::string> describe() const;

 private:
  struct Device;
  struct Session;

  Device* find(const std::string& name);
  const Device* find(const std::string& name) const;
  void accept(Device& device);
  void serve(const std::shared_ptr<Session>& session);
  void schedule_timeline(Device& device, size_t step, double cycle_start);
  void schedule_random(Device& device);
  void random_change(Device& device);
  void log_actuation(Actuation actuation);

  asio::io_context& io_;
  EmulatorConfig config_;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Actuation> actuations_;
  std::FILE* log_ = nullptr;
  std::mt19937_64 rng_;
  std::shared_ptr<Emulator*> alive_;
};

}  // namespace mesh::meshemu
