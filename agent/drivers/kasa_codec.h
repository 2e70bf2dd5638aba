#pragma once

// The TP-Link Kasa local protocol ("TP-Link Smart Home Protocol"), without
// I/O: the cipher, the framing, the requests the driver sends and the replies
// it reads. The Kasa driver (kasa_driver.h) and the device emulator
// (tools/meshemu) both use it.
//
// Wire format, TCP port 9999: every message is a 4-byte big-endian length
// followed by that many bytes of JSON enciphered with an XOR autokey cipher
// whose initial key is 171 (encrypt: key = plain ^ key, send key; decrypt:
// plain = key ^ cipher, key = cipher). A request is a JSON object of modules,
// each an object of methods with their arguments:
//   {"system":{"get_sysinfo":{}}}
//   {"system":{"set_relay_state":{"state":1}}}
//   {"smartlife.iot.dimmer":{"set_brightness":{"brightness":30}}}
//   {"smartlife.iot.smartbulb.lightingservice":{"transition_light_state":
//       {"on_off":1,"brightness":30,"color_temp":2700,"ignore_default":1}}}
//   {"context":{"child_ids":["ID"]},"system":{"set_relay_state":{"state":0}}}   (a power-strip outlet)
// and the reply mirrors it with each method's result and "err_code" (0 = ok).
//
// Attributes (device_model.h) per kind, read from system.get_sysinfo:
//   plug, switch      power = relay_state (0|1); a strip outlet: children[id].state
//   dimmer            power = relay_state, brightness
//   bulb              light_state.{on_off, brightness, color_temp}; while off a
//                     bulb reports brightness/color_temp in light_state.dft_on_state
// Kasa has no sensors, locks or thermostats. meshagent's extension, spoken by
// the device emulator (tools/meshemu), adds top-level get_sysinfo fields and
// two modules that real devices do not have:
//   motion_sensor     "motion": 0|1
//   contact_sensor    "contact": 0|1          (1 = contact made: door closed)
//   occupancy_sensor  "occupancy": 0|1
//   sensor            "temperature": °C, "humidity": %, "illuminance": lux (any subset)
//   lock              "locked": 0|1;   set: {"meshagent.lock":{"set_locked":{"locked":0|1}}}
//   thermostat        "target": °C, "temperature": °C;
//                     set: {"meshagent.thermostat":{"set_target":{"target":21.5}}}
// A command's id travels in one more extension module, which real devices
// answer with err_code -1 "module not support" and otherwise ignore (the
// driver ignores that answer too):
//   "meshagent":{"command_id":"..."}
// so the emulator can log which command caused an actuation.
//
// Nothing here throws on bad input: replies are parsed with nlohmann-json's
// non-throwing parser and every field is type-checked before use.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "routine/device_driver.h"
#include "routine/device_model.h"

namespace mesh::drivers::kasa {

inline constexpr uint8_t kInitialKey = 171;
inline constexpr uint16_t kDefaultPort = 9999;
inline constexpr size_t kHeaderSize = 4;
// Largest reply accepted; a real device's sysinfo is 1-3 KiB.
inline constexpr size_t kMaxReplySize = 64 * 1024;
// JSON nested deeper than this is refused before it is parsed (a real reply
// nests 4 levels).
inline constexpr int kMaxJsonDepth = 32;

// The extension module carrying a command's id (see above).
inline constexpr std::string_view kCommandIdModule = "meshagent";
inline constexpr std::string_view kLockModule = "meshagent.lock";
inline constexpr std::string_view kThermostatModule = "meshagent.thermostat";
inline constexpr std::string_view kDimmerModule = "smartlife.iot.dimmer";
inline constexpr std::string_view kBulbModule = "smartlife.iot.smartbulb.lightingservice";

std::string encrypt(std::string_view plain);
std::string decrypt(std::string_view cipher);

// The 4-byte length prefix followed by the enciphered `plain`.
std::string encode_frame(std::string_view plain);

// Reassembles one frame from a byte stream that arrives in pieces: feed()
// what was read until status() is not need_more, then take() the deciphered
// payload. A declared length above the maximum is refused as soon as the
// header is in, before any payload is buffered.
class FrameReader {
 public:
  enum class Status { need_more, complete, oversized };

  explicit FrameReader(size_t max_payload = kMaxReplySize) : max_payload_(max_payload) {}

  // Consumes bytes up to the end of the frame and returns how many it took;
  // bytes after the frame are left to the caller.
  size_t feed(std::string_view bytes);
  Status status() const { return status_; }
  bool header_complete() const { return header_.size() == kHeaderSize; }
  // The length the header declares (0 until the header is complete).
  uint32_t declared_length() const { return declared_; }
  // Header and payload bytes consumed so far.
  size_t consumed() const { return header_.size() + payload_.size(); }
  // The deciphered payload of a complete frame; resets the reader for the
  // next frame. Empty unless status() == complete.
  std::string take();

 private:
  size_t max_payload_;
  std::string header_;
  std::string payload_;
  uint32_t declared_ = 0;
  Status status_ = Status::need_more;
};

// The device behind one endpoint.
struct Target {
  routine::DeviceKind kind = routine::DeviceKind::plug;
  // A power-strip outlet (plug and switch kinds only): its id as the strip's
  // sysinfo lists it under children[].id, e.g. "8006...00" or "00".
  std::string child_id;
};

// Nesting depth of the JSON in `text` (brackets outside strings), counted
// without parsing; stops counting at `limit` + 1.
int json_depth(std::string_view text, int limit = kMaxJsonDepth);

// {"system":{"get_sysinfo":{}}}
std::string sysinfo_request();

struct ActuateOptions {
  // Sent as the extension module "meshagent" when not empty.
  std::string command_id;
  // Bulbs: transition_period in milliseconds, if set.
  std::optional<int> transition_ms;
};

// The request that sets `values` (attributes of target.kind, already checked
// against the schema). An error names the attribute Kasa cannot set on this
// kind (a sensor reading, a strip outlet's brightness).
core::Expected<std::string, std::string> actuate_request(const Target& target, const routine::Attributes& values,
                                                         const ActuateOptions& options = {});

// The device's state from a get_sysinfo reply (plain JSON, deciphered).
// protocol: not JSON, too deep, not the shape above, the outlet missing;
// refused: err_code != 0.
routine::DriverResult parse_sysinfo_reply(const Target& target, std::string_view json);

// The outcome of actuate_request(target, values): every module and method the
// request named must answer err_code 0 (refused otherwise), except the
// command-id module. A bulb reports its new light state, returned as
// attributes; other kinds return empty attributes (read again to see them).
routine::DriverResult parse_actuate_reply(const Target& target, const routine::Attributes& values,
                                          std::string_view json);

}  // namespace mesh::drivers::kasa
