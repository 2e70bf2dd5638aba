#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"

namespace mesh::routine {

// A routine's trigger: a condition over device attributes, optionally
// restricted to a time-of-day window and to days of the week.
//
// The condition is an expression:
//
//   hall_motion.motion == on and not (hall_sensor.illuminance > 300)
//   front_door.contact == off or (lab.temperature >= 28.5 and lab.humidity < 40)
//   manual
//
// - a comparison is DEVICE.ATTR OP VALUE, OP one of == != < <= > >=, VALUE
//   a number (-5, 21.5), on/off, true/false or a "quoted string" (inside,
//   a backslash escapes a quote or a backslash); device ids may contain
//   dots, the attribute is what follows the last one;
// - `not` binds tighter than `and`, which binds tighter than `or`;
//   parentheses group;
// - `manual`, as the whole condition, means the routine runs only when asked
//   to (meshctl routine run), never on a device change.
//
// Time is not part of the expression: a routine's `window` ("22:00-06:00",
// HH:MM-HH:MM, start included, end excluded, wrapping midnight when the end
// is earlier) and `days` ("mon".."sun", ranges "mon..fri") are fields of
// their own, kept in the Trigger beside the condition. A window that wraps
// midnight belongs to the day it starts on: with days = ["fri"] and
// window = "22:00-06:00", Saturday 02:00 is inside (Friday night) and Friday
// 02:00 is not.
//
// Parsing never crashes and never recurses without bound: the text, and the
// canonical form format_condition prints for it, are at most
// kMaxTriggerLength bytes, and nest at most kMaxTriggerDepth levels of
// parentheses and `not`.

inline constexpr size_t kMaxTriggerLength = 4096;
inline constexpr size_t kMaxTriggerDepth = 64;

enum class CompareOp { eq, ne, lt, le, gt, ge };
std::string_view to_string(CompareOp op);

struct Comparison {
  std::string device;
  std::string attribute;
  CompareOp op = CompareOp::eq;
  Value value;
  // How the value was written, so it prints back the same way (on, true, 30).
  std::string value_text;

  friend bool operator==(const Comparison&, const Comparison&) = default;
};

struct Condition {
  enum class Kind { comparison, all_of, any_of, negation };
  Kind kind = Kind::comparison;
  Comparison comparison;            // kind comparison
  std::vector<Condition> operands;  // all_of, any_of: two or more; negation: one

  friend bool operator==(const Condition&, const Condition&) = default;
};

enum class Weekday : uint8_t { mon, tue, wed, thu, fri, sat, sun };
std::string_view to_string(Weekday day);

// A set of weekdays, bit i for Weekday(i).
struct Days {
  uint8_t mask = 0x7f;

  bool contains(Weekday day) const { return (mask >> static_cast<unsigned>(day)) & 1u; }
  bool every() const { return mask == 0x7f; }
  friend bool operator==(const Days&, const Days&) = default;
};

// Minutes of the day, [start, end); wraps midnight when end < start.
struct TimeWindow {
  uint16_t start = 0;
  uint16_t end = 0;

  bool wraps() const { return end < start; }
  bool contains(uint32_t minute_of_day) const;
  friend bool operator==(const TimeWindow&, const TimeWindow&) = default;
};

struct Trigger {
  bool manual = false;
  Condition condition;  // unless manual
  std::optional<TimeWindow> window;
  Days days;

  friend bool operator==(const Trigger&, const Trigger&) = default;
};

// A parse error at a place in the trigger text (line and column from 1,
// columns in bytes).
struct TriggerError {
  uint32_t line = 1;
  uint32_t column = 1;
  std::string message;

  // "trigger:1:14: expected a value after '>='; ..."
  std::string text() const;
};

// The devices a trigger may name, by id (Catalog::devices()).
using DeviceCatalog = std::map<std::string, DeviceSpec>;

// Parses a condition ("manual" included; the window and days stay unset).
// With a catalog, every DEVICE.ATTR must name a device of it and an
// attribute of its kind, and each value must have the attribute's type.
core::Expected<Trigger, TriggerError> parse_trigger(std::string_view text);
core::Expected<Trigger, TriggerError> parse_trigger(std::string_view text, const DeviceCatalog& catalog);

// "22:00-06:00" -> {1320, 360}; the error says what is wrong and how to
// write it.
core::Expected<TimeWindow, std::string> parse_window(std::string_view text);
std::string format_window(const TimeWindow& window);
// One entry of a days list: "mon", or a range "mon..fri" (wrapping past
// sunday: "sat..mon").
core::Expected<Days, std::string> parse_days(std::string_view text);
// Names of the days in order: {"mon", "tue", ...}.
std::vector<std::string> format_days(const Days& days);

// The condition as it would be written, normalized: "a.x == 1 and (b.y == on
// or not c.z > 2)". Parsing it gives an equal condition.
std::string format_condition(const Trigger& trigger);

// The devices whose changes can change the trigger's value (the routine
// leader subscribes to their device leaders).
std::set<std::string> devices(const Trigger& trigger);

// A device's current state, or nullptr when unknown.
using StateLookup = std::function<const Attributes*(const std::string& device)>;

// Whether the trigger holds at local `minute_of_day` (0..1439) of `day`.
// A comparison whose device or attribute is unknown, or whose value has
// another type than the state's, is false (so `not` of it is true). A
// manual trigger never holds.
bool evaluate(const Trigger& trigger, const StateLookup& state, uint32_t minute_of_day, Weekday day);

}  // namespace mesh::routine
