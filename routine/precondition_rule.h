#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"
#include "routine/trigger.h"
#include "routine/value_domain.h"

namespace mesh::routine {

// APEX precondition rules (apex.md §2, §5): "before a command may make the
// condition `when` true, every condition of `requires` must hold". A rule
// states only direct preconditions (§5.1); the indirect ones follow from
// other rules when the precondition graph is built (precondition_graph.h).
// A rule's conditions name concrete devices; the paper's attribute-based
// rules (every outlet of room X) would expand to these before they reach
// here.
//
// A condition is a predicate on one device attribute, written the way a
// trigger comparison is (routine/trigger.h), plus ranges and sets:
//
//   garden_sprinkler.power == on        == and != on any attribute
//   lab_thermostat.target >= 18         < <= > >= on numbers
//   lab_thermostat.target in 18..24     an inclusive range: LO..HI, no spaces
//   hall_light.brightness in {0, 50}    a set: on/off, true/false, numbers or
//   hall_mode.preset in {"eco", "away"}   "quoted strings", one kind per set
//
// A set lists values in order of preference: when a command must make it
// true, the first value that fits is chosen (command_deduction.h).
//
// The rules file is TOML, one [[precondition]] table per rule:
//
//   [[precondition]]
//   id = "sprinkler_needs_outlets_off"        # [a-z0-9_.-]+, unique in the file
//   when = "garden_sprinkler.power == on"     # a condition a command can make true
//   requires = ["outlet_1.power == off",      # one or more conditions, all of which
//               "outlet_2.power == off"]      #   must hold first (AND, §2)
//
// The file is ASCII throughout, comments included.
//
// Parsing never crashes: text and sizes are bounded by the limits below, and
// every problem is reported with the rule and the key it is in.

inline constexpr size_t kMaxConditionLength = 1024;
inline constexpr size_t kMaxConditionSetMembers = 64;
inline constexpr size_t kMaxRulePreconditions = 32;
inline constexpr size_t kMaxPreconditionRules = 1024;
inline constexpr size_t kMaxPreconditionRuleIdLength = 64;
inline constexpr size_t kMaxPreconditionFileBytes = 1 << 20;

// One state variable of apex.md: an attribute of an object (a device).
struct Variable {
  std::string device;
  std::string attribute;

  std::string text() const { return device + "." + attribute; }
  friend auto operator<=>(const Variable&, const Variable&) = default;
};

// A condition ⟨device : attribute ∈ domain⟩.
struct AttributeCondition {
  Variable variable;
  ValueDomain domain;
  // A command can set the attribute; a reading (a sensor's temperature)
  // can only be checked.
  bool settable = true;

  // "outlet_1.power == off", "lab_thermostat.target in 18..24".
  std::string text() const;
  friend bool operator==(const AttributeCondition&, const AttributeCondition&) = default;
};

struct PreconditionRule {
  std::string id;
  AttributeCondition when;
  // The `requires` list: AND-combined, at most one condition per variable,
  // none on `when`'s variable.
  std::vector<AttributeCondition> preconditions;

  friend bool operator==(const PreconditionRule&, const PreconditionRule&) = default;
};

// A problem at a byte column (from 1) of a condition's text.
struct ConditionError {
  uint32_t column = 1;
  std::string message;

  // "column 14: expected a value after '>='; ..."
  std::string text() const;
};

// Parses one condition. With devices, DEVICE.ATTR must name a device of
// them and an attribute of its kind, values must have the attribute's type
// and, for == != and sets, be values it allows; the domain is narrowed to
// the attribute's range and must keep a value. Without devices, a value's
// spelling gives its kind and numbers are unbounded reals.
core::Expected<AttributeCondition, ConditionError> parse_condition(std::string_view text);
core::Expected<AttributeCondition, ConditionError> parse_condition(std::string_view text, const DeviceCatalog& devices);

// The condition a command setting `attribute` of `device` to `value` makes
// true (apex.md §2, Command): "attribute == value". The error, if the
// command is not one the device takes, names the device and the attribute.
core::Expected<AttributeCondition, std::string> command_condition(const DeviceSpec& device,
                                                                  const std::string& attribute, const Value& value);

// Empty if `id` is a valid rule id, else what is wrong with it.
std::optional<std::string> check_precondition_rule_id(std::string_view id);

// A rule as its writer gave it: the id and the conditions' text. The
// catalog keeps, replicates and persists rules in this form and resolves
// them against its devices whenever those change (resolve_rule), so a rule
// outlives a device it names: it stays defined and the catalog says why it
// cannot apply, as it does for a routine. Text, not the parsed form, is what
// travels, so the condition grammar alone defines a rule on every node.
struct PreconditionRuleSpec {
  std::string id;
  std::string when;
  std::vector<std::string> required;  // the `requires` list

  friend bool operator==(const PreconditionRuleSpec&, const PreconditionRuleSpec&) = default;
};

// The rule `spec` states, checked against `devices` as a rule of a rules
// file is (below). The error names the rule and the key, e.g.
// "precondition fire_safe.requires[2]: column 1: no device outlet_9 ...".
core::Expected<PreconditionRule, std::string> resolve_rule(const PreconditionRuleSpec& spec,
                                                           const DeviceCatalog& devices);

// Which file the [[precondition]] tables are read from: a rules file holds
// nothing else; a catalog file (agent/catalog_file.h) also holds [[device]]
// and [[routine]] tables, which its own parser reads and checks.
enum class RuleFileKind { rules, catalog };

// Parses and checks a rules file against `devices`. The error lists every
// problem, one per line, as "SOURCE:LINE: precondition ID.KEY: problem.
// Fix: ...": TOML syntax, a table other than [[precondition]], an unknown
// key, a missing or invalid or duplicate id, a bad condition (unknown
// device or attribute, value of the wrong type, bad operator), a `when` on
// a reading, an empty or oversized `requires`, two requirements on one
// variable, a requirement on `when`'s own variable. A file over
// kMaxPreconditionFileBytes, or with a byte outside ASCII (comments
// included: see first_non_ascii_line in the .cc), is refused whole.
core::Expected<std::vector<PreconditionRule>, std::string> parse_precondition_rules(std::string_view text,
                                                                                    const std::string& source,
                                                                                    const DeviceCatalog& devices);
// The same, giving each rule as written: what a catalog keeps. `kind`
// catalog ignores the tables other than [[precondition]]; the file must
// still be ASCII throughout (first_non_ascii_line in the .cc says why).
core::Expected<std::vector<PreconditionRuleSpec>, std::string> parse_precondition_rule_specs(
    std::string_view text, const std::string& source, const DeviceCatalog& devices, RuleFileKind kind);

}  // namespace mesh::routine
