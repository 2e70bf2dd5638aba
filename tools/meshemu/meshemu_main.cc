// meshemu: emulated TP-Link Kasa devices for the testbed and the demo.
#include <charconv>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <fmt/format.h>

#include "tools/meshemu/emulator.h"

namespace {

constexpr const char* kHelp = R"(NAME
    meshemu - emulated TP-Link Kasa smart-home devices

SYNOPSIS
    meshemu --config FILE [--log FILE] [--seed N] [--address ADDR]
    meshemu --device KIND:NAME:PORT[:ADDRESS] ... [--log FILE] [--seed N] [--address ADDR]
    meshemu --help

DESCRIPTION
    meshemu emulates plugs, switches, dimmers, bulbs, power strips and (through
    meshagent's protocol extension) sensors, locks and thermostats. Each device
    listens on its own TCP endpoint and speaks the real Kasa local protocol: a
    4-byte big-endian length, then JSON enciphered with the XOR autokey cipher
    (initial key 171). meshagent's Kasa driver (kasa://HOST:PORT) talks to it
    as to a real device, and so can other clients of the local protocol.

    Supported requests: system.get_sysinfo, system.set_relay_state (strips:
    with "context":{"child_ids":[...]}), smartlife.iot.dimmer.set_brightness,
    smartlife.iot.smartbulb.lightingservice.transition_light_state, and the
    extension modules meshagent.lock.set_locked {"locked":0|1} and
    meshagent.thermostat.set_target {"target":C}. Unknown modules are answered
    with err_code -1 "module not support", unknown methods with -2, bad
    arguments with -3, as real devices do. A request that is not JSON or a
    frame over 16 KiB closes the connection. Sensor readings appear in
    get_sysinfo as "motion", "contact", "occupancy" (0|1), "temperature",
    "humidity", "illuminance"; a lock reports "locked", a thermostat "target"
    and "temperature".

    On start meshemu prints one line per device, "NAME KIND ADDRESS:PORT"
    (the real port when 0 was asked for), then "ready", and runs until SIGINT
    or SIGTERM.

OPTIONS
    --config FILE
        The devices, in TOML (below).
    --device KIND:NAME:PORT[:ADDRESS]
        One device, repeatable, instead of a file. PORT 0 picks a free
        port. KIND is one of:
            KINDS
    --log FILE
        Append the actuation log to FILE (overrides actuation_log).
    --seed N
        Seed of the random sensor changes (default 1; overrides seed).
    --address ADDR
        Default listen address (default 127.0.0.1; overrides address).
    --help
        This text.

CONFIGURATION
    Top-level keys, then one [[device]] table per device. Relative paths
    resolve against the file's directory.

        address = "127.0.0.1"           # default listen address
        actuation_log = "actuations.log"
        seed = 7                        # random sensor changes

        [[device]]
        name = "hall_plug"              # used in the log and sysinfo alias
        kind = "plug"                   # a KIND listed under --device
        port = 9901                     # 0 = any free port
        power = "on"                    # initial state: any attribute of the kind

        [[device]]
        name = "hall_light"
        kind = "bulb"
        port = 9902
        power = true
        brightness = 40
        color_temp = 2700
        reply_delay_ms = 0              # answer late (> driver timeout: never)

        [[device]]
        name = "kitchen_strip"
        kind = "strip"                  # outlets <deviceId>00, 01, ... (or just 00, 01)
        port = 9903
        outlets = 3                     # 1..16
        power = "off"                   # all outlets

        [[device]]
        name = "hall_motion"
        kind = "motion_sensor"
        port = 9904
        timeline = [ { at = 0, motion = "off" }, { at = 5, motion = "on" },
                     { at = 12, motion = "off" } ]
        repeat_after = 20               # seconds; loop the timeline

        [[device]]
        name = "office_climate"
        kind = "sensor"
        port = 9905
        temperature = 21.5
        random_every = 2.0              # seconds; readings change at random

    A timeline step sets attributes at AT seconds after start; random_every
    flips on/off readings with probability 1/2 and moves temperature (15..30,
    steps of 0.5), humidity (20..80, steps of 2) and illuminance (0..1000,
    steps of 50) by at most one step, from the seed. Errors name the file,
    the line and the key.

ACTUATION LOG
    One JSON object per line, appended and flushed per actuation (a request
    with at least one set_* or transition_light_state method):

        {"command":{...},"command_id":"c-42","device":"hall_plug","mono_s":12.5,
         "ok":true,"wall":"2026-11-25T01:23:45.678Z"}

    mono_s: seconds since meshemu started (monotonic clock); wall: UTC time;
    command: the request as received; command_id: the value of the extension
    field "meshagent":{"command_id":"..."} that meshagent's Kasa driver sends
    with every command (real devices ignore it), or null; ok: every setter in
    the request succeeded (err_code 0).

EXIT STATUS
    0 after SIGINT/SIGTERM; 1 on a configuration or start-up error (port in
    use, unwritable log), with a message naming the cause; 2 on bad usage.

EXAMPLES
    meshemu --device plug:lamp:9999 --device motion_sensor:hall:10000
    meshemu --config tools/meshemu/example.toml --log /tmp/actuations.log
)";

std::string help_text() {
  std::string text = kHelp;
  // One line of kinds, wrapped to the help's width.
  std::string kinds;
  size_t line = 0;
  for (const auto& kind : mesh::meshemu::emulated_kinds()) {
    if (!kinds.empty()) {
      kinds += ",";
      ++line;
      if (line + kind.size() + 1 > 60) {
        kinds += "\n            ";
        line = 0;
      } else {
        kinds += " ";
        ++line;
      }
    }
    kinds += kind;
    line += kind.size();
  }
  for (size_t at = text.find("KINDS"); at != std::string::npos; at = text.find("KINDS", at)) {
    text.replace(at, 5, kinds);
    at += kinds.size();
  }
  return text;
}

int usage(const std::string& message) {
  std::fprintf(stderr, "meshemu: %s\nTry 'meshemu --help'.\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::vector<mesh::meshemu::DeviceConfig> devices;
  std::optional<std::string> log_path;
  std::optional<uint64_t> seed;
  std::optional<std::string> address;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    auto next = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return std::string(args[++i]);
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(help_text().c_str(), stdout);
      return 0;
    }
    if (arg == "--config" || arg == "--device" || arg == "--log" || arg == "--seed" || arg == "--address") {
      auto value = next();
      if (!value) return usage(fmt::format("{} needs a value", arg));
      if (arg == "--config") {
        config_path = *value;
      } else if (arg == "--device") {
        auto device = mesh::meshemu::parse_device_option(*value);
        if (!device) return usage(device.error());
        devices.push_back(std::move(*device));
      } else if (arg == "--log") {
        log_path = *value;
      } else if (arg == "--address") {
        address = *value;
      } else {
        uint64_t n = 0;
        auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
        if (ec != std::errc() || end != value->data() + value->size()) {
          return usage(fmt::format("--seed '{}' is not a number", *value));
        }
        seed = n;
      }
      continue;
    }
    return usage(fmt::format("unknown argument '{}'", arg));
  }
  if (config_path.empty() == devices.empty()) return usage("give either --config FILE or --device options");

  mesh::meshemu::EmulatorConfig config;
  if (!config_path.empty()) {
    auto loaded = mesh::meshemu::load_config(config_path);
    if (!loaded) {
      std::fprintf(stderr, "meshemu: %s\n", loaded.error().c_str());
      return 1;
    }
    config = std::move(*loaded);
  } else {
    config.devices = std::move(devices);
  }
  if (log_path) config.actuation_log = *log_path;
  if (seed) config.seed = *seed;
  if (address) config.address = *address;

  try {
    asio::io_context io;
    mesh::meshemu::Emulator emulator(io, std::move(config));
    for (const auto& line : emulator.describe()) std::printf("%s\n", line.c_str());
    std::printf("ready\n");
    std::fflush(stdout);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&io](const asio::error_code&, int) { io.stop(); });
    io.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshemu: %s\n", e.what());
    return 1;
  }
  return 0;
}
