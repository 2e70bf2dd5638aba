#include "routine/device_model.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

constexpr AttributeSpec on_off(std::string_view name, bool writable) {
  return {name, AttributeType::on_off, 0, 0, false, writable};
}
constexpr AttributeSpec boolean(std::string_view name, bool writable) {
  return {name, AttributeType::boolean, 0, 0, false, writable};
}
constexpr AttributeSpec number(std::string_view name, double min, double max, bool integer, bool writable) {
  return {name, AttributeType::number, min, max, integer, writable};
}

struct KindRow {
  DeviceKind kind;
  std::string_view name;
  std::vector<AttributeSpec> attributes;
};

// The schema of every kind. Ranges follow what the devices accept: Kasa
// dimmers and bulbs take brightness 0..100 and colour temperature 2500..9000 K;
// thermostats a target of 5..35 °C.
const std::vector<KindRow>& kind_table() {
  static const std::vector<KindRow> table = {
      {DeviceKind::switch_, "switch", {on_off("power", true)}},
      {DeviceKind::plug, "plug", {on_off("power", true)}},
      {DeviceKind::dimmer, "dimmer", {on_off("power", true), number("brightness", 0, 100, true, true)}},
      {DeviceKind::bulb,
       "bulb",
       {on_off("power", true), number("brightness", 0, 100, true, true), number("color_temp", 2500, 9000, true, true)}},
      {DeviceKind::motion_sensor, "motion_sensor", {on_off("motion", false)}},
      {DeviceKind::contact_sensor, "contact_sensor", {on_off("contact", false)}},
      {DeviceKind::occupancy_sensor, "occupancy_sensor", {on_off("occupancy", false)}},
      {DeviceKind::sensor,
       "sensor",
       {number("temperature", -60, 150, false, false), number("humidity", 0, 100, false, false),
        number("illuminance", 0, 200000, false, false)}},
      {DeviceKind::lock, "lock", {boolean("locked", true)}},
      {DeviceKind::thermostat,
       "thermostat",
       {number("target", 5, 35, false, true), number("temperature", -60, 150, false, false)}},
  };
  return table;
}

const KindRow& row_of(DeviceKind kind) {
  for (const auto& row : kind_table()) {
    if (row.kind == kind) return row;
  }
  return kind_table().front();  // unreachable: every enumerator has a row
}

std::string format_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);
}

bool value_fits(const AttributeSpec& spec, const Value& value) {
  switch (spec.type) {
    case AttributeType::on_off:
    case AttributeType::boolean:
      return std::holds_alternative<bool>(value);
    case AttributeType::number: {
      const auto* number = std::get_if<double>(&value);
      if (number == nullptr || !std::isfinite(*number)) return false;
      if (spec.integer && *number != std::floor(*number)) return false;
      return *number >= spec.min && *number <= spec.max;
    }
  }
  return false;
}

}  // namespace

std::string AttributeSpec::allowed() const {
  switch (type) {
    case AttributeType::on_off:
      return "on or off";
    case AttributeType::boolean:
      return "true or false";
    case AttributeType::number:
      return fmt::format("{} {}..{}", integer ? "an integer" : "a number", format_number(min), format_number(max));
  }
  return {};
}

std::string_view to_string(DeviceKind kind) { return row_of(kind).name; }

std::optional<DeviceKind> parse_kind(std::string_view text) {
  for (const auto& row : kind_table()) {
    if (row.name == text) return row.kind;
  }
  return std::nullopt;
}

const std::vector<DeviceKind>& all_kinds() {
  static const std::vector<DeviceKind> kinds = [] {
    std::vector<DeviceKind> out;
    for (const auto& row : kind_table()) out.push_back(row.kind);
    return out;
  }();
  return kinds;
}

const std::vector<AttributeSpec>& schema(DeviceKind kind) { return row_of(kind).attributes; }

const AttributeSpec* find_attribute(DeviceKind kind, std::string_view name) {
  for (const auto& spec : schema(kind)) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string printable_char(char c) {
  return (c >= 0x20 && c < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", c & 0xff);
}

std::optional<std::string> check_device_id(std::string_view id) {
  if (id.empty()) return "a device id must not be empty";
  if (id.size() > kMaxDeviceIdLength) {
    return fmt::format("device id '{}...' is longer than {} characters", id.substr(0, 16), kMaxDeviceIdLength);
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) {
      return fmt::format("device id '{}' has '{}': use lower-case letters, digits, '_', '.' and '-'", id,
                         printable_char(c));
    }
  }
  return std::nullopt;
}

std::string format_value(const AttributeSpec& spec, const Value& value) {
  if (const auto* flag = std::get_if<bool>(&value)) {
    if (spec.type == AttributeType::on_off) return *flag ? "on" : "off";
    return *flag ? "true" : "false";
  }
  return format_value(value);
}

std::string format_value(const Value& value) {
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const auto* number = std::get_if<double>(&value)) return format_number(*number);
  return std::get<std::string>(value);
}

std::string format_attributes(DeviceKind kind, const Attributes& attributes) {
  std::string out;
  for (const auto& [name, value] : attributes) {
    if (!out.empty()) out += ' ';
    const auto* spec = find_attribute(kind, name);
    out += fmt::format("{}={}", name, spec != nullptr ? format_value(*spec, value) : format_value(value));
  }
  return out;
}

core::Expected<Value, std::string> parse_value(const AttributeSpec& spec, std::string_view text) {
  auto wrong = [&] {
    return core::Unexpected(fmt::format("{}={} is not allowed: allowed is {}", spec.name, text, spec.allowed()));
  };
  switch (spec.type) {
    case AttributeType::on_off:
      if (text == "on") return Value{true};
      if (text == "off") return Value{false};
      return wrong();
    case AttributeType::boolean:
      if (text == "true") return Value{true};
      if (text == "false") return Value{false};
      return wrong();
    case AttributeType::number: {
      double number = 0;
      const auto* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, number);
      if (text.empty() || ec != std::errc() || ptr != end) return wrong();
      if (!value_fits(spec, Value{number})) {
        return core::Unexpected(fmt::format("{}={} is out of range: allowed is {}", spec.name, text, spec.allowed()));
      }
      return Value{number};
    }
  }
  return wrong();
}

std::optional<std::string> check_command(const DeviceSpec& device, const Attributes& values) {
  if (values.empty()) return fmt::format("device {}: a command must set at least one attribute", device.id);
  for (const auto& [name, value] : values) {
    const auto* spec = find_attribute(device.kind, name);
    if (spec == nullptr) {
      std::string known;
      for (const auto& attribute : schema(device.kind)) {
        if (attribute.writable) known += fmt::format("{}{}", known.empty() ? "" : ", ", attribute.name);
      }
      return fmt::format("device {}: a {} has no attribute '{}' (it has: {})", device.id, to_string(device.kind), name,
                         known.empty() ? "none that can be set" : known);
    }
    if (!spec->writable) {
      return fmt::format("device {}: {} is a reading and cannot be set", device.id, name);
    }
    if (!value_fits(*spec, value)) {
      return fmt::format("device {}: {}={} is not allowed: allowed is {}", device.id, name, format_value(*spec, value),
                         spec->allowed());
    }
  }
  return std::nullopt;
}

std::vector<std::string> sanitize_state(DeviceKind kind, Attributes& state) {
  std::vector<std::string> dropped;
  for (auto it = state.begin(); it != state.end();) {
    const auto* spec = find_attribute(kind, it->first);
    if (spec == nullptr || !value_fits(*spec, it->second)) {
      dropped.push_back(fmt::format("{}={}", it->first, format_value(it->second)));
      it = state.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

}  // namespace mesh::routine
