#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/expected.h"
#include "kgroup/geometry.h"

namespace mesh::routine {

// One attribute value. On/off attributes (power, motion, ...) and true/false
// attributes (locked) are bools; they differ only in how they are written.
using Value = std::variant<bool, double, std::string>;
// A device's state, or the attributes one command sets: name -> value.
using Attributes = std::map<std::string, Value>;

// What an attribute holds. A new kind of device is a new row in the schema
// table (device_model.cc), not new code.
enum class AttributeType {
  on_off,   // "on" | "off"
  boolean,  // "true" | "false"
  number,   // within [min, max]; whole numbers only if `integer`
};

struct AttributeSpec {
  std::string_view name;
  AttributeType type = AttributeType::number;
  double min = 0;
  double max = 0;
  bool integer = false;
  // A command may set it (a sensor reading may not be commanded).
  bool writable = false;
  // Says what a value must be, for error messages: "on or off",
  // "an integer 0..100".
  std::string allowed() const;
};

enum class DeviceKind {
  switch_,  // written "switch"
  plug,
  dimmer,
  bulb,
  motion_sensor,
  contact_sensor,
  occupancy_sensor,
  sensor,  // numeric: temperature, humidity, illuminance (any subset reported)
  lock,
  thermostat,
};

std::string_view to_string(DeviceKind kind);
std::optional<DeviceKind> parse_kind(std::string_view text);
// Every kind, in declaration order (for help texts and errors).
const std::vector<DeviceKind>& all_kinds();
// The attributes a device of `kind` has.
const std::vector<AttributeSpec>& schema(DeviceKind kind);
const AttributeSpec* find_attribute(DeviceKind kind, std::string_view name);

// A device as the catalog declares it.
struct DeviceSpec {
  std::string id;  // [a-z0-9_.-]+, at most kMaxDeviceIdLength
  DeviceKind kind = DeviceKind::plug;
  kgroup::Location location{};  // metres
  std::string room;             // optional labels
  std::string floor;
  std::string driver;  // URI: kasa://HOST[:PORT][?child=ID], mqtt://..., emulated://...

  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

inline constexpr size_t kMaxDeviceIdLength = 64;

// Empty if `id` is a valid device id, else what is wrong with it.
std::optional<std::string> check_device_id(std::string_view id);

// How an error message shows a character of the user's input: itself if it
// is printable ASCII (space included), else \xNN, so a control or UTF-8
// byte is visible.
std::string printable_char(char c);

// Formats a value as the schema writes it ("on", "true", "30", "21.5").
std::string format_value(const AttributeSpec& spec, const Value& value);
std::string format_value(const Value& value);
// "power=on brightness=30", attributes in name order.
std::string format_attributes(DeviceKind kind, const Attributes& attributes);

// Parses `text` as a value of `spec` ("on", "off", "true", "42", "21.5").
// The error names the attribute and says what is allowed.
core::Expected<Value, std::string> parse_value(const AttributeSpec& spec, std::string_view text);

// Checks that a command may set `values` on `device`: every attribute exists,
// is writable and in range. The error names the device, the attribute and
// what is allowed, e.g. "device hall_light: brightness=150 is out of range:
// allowed is an integer 0..100".
std::optional<std::string> check_command(const DeviceSpec& device, const Attributes& values);
// Checks a state reported by a driver: unknown attributes and values of the
// wrong type or range are dropped (a driver must not poison the replicated
// state), returning what was dropped, for the log.
std::vector<std::string> sanitize_state(DeviceKind kind, Attributes& state);

}  // namespace mesh::routine
