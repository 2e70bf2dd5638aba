#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "routine/device_model.h"

namespace mesh::routine {

// How a condition's values are written. on_off and boolean hold the same
// bool and differ only in print; a text value is a "quoted string".
enum class ValueKind { on_off, boolean, number, text };
std::string_view to_string(ValueKind kind);

// One end of a numeric interval.
struct Bound {
  double value = 0;
  bool inclusive = true;

  friend bool operator==(const Bound&, const Bound&) = default;
};

// The values of one device attribute that satisfy a predicate (apex.md §2:
// `==`, `!=`, ordering, `in`): either a finite set, listed in the order the
// rule writer gave it (deduction picks the first that fits, §6.2), or, for
// numbers and text, an interval with finitely many points taken out (`!=`).
// Text has no order, so a text interval is unbounded: "any text but these".
//
// This shape is closed under intersection (set ∩ set, set ∩ interval,
// interval ∩ interval, each keeping the points taken out), which is what
// merging two rules' conditions on one variable needs (§6.1), and every
// domain is kept normalized so that two equal sets of values compare equal:
// an integer interval has inclusive whole-number bounds, an interval holding
// one value or none becomes a finite set, and excluded points lie inside the
// bounds, sorted.
struct ValueDomain {
  ValueKind kind = ValueKind::number;
  bool finite = false;
  std::vector<Value> members;  // finite: the allowed values, no duplicates
  std::optional<Bound> low;    // number, not finite: none is unbounded
  std::optional<Bound> high;
  bool integer = false;         // number: whole numbers only
  std::vector<Value> excluded;  // not finite: points taken out

  friend bool operator==(const ValueDomain&, const ValueDomain&) = default;
};

// Every value of `kind` (a bool kind: {off, on}); `integer` for whole numbers.
ValueDomain any_value(ValueKind kind, bool integer = false);
// Exactly `values`, in this order; later duplicates are dropped.
ValueDomain one_of(ValueKind kind, std::vector<Value> values);
// The numbers between `low` and `high` (an absent bound is unbounded).
ValueDomain between(std::optional<Bound> low, std::optional<Bound> high, bool integer = false);
// `domain` without `value`.
ValueDomain without(ValueDomain domain, const Value& value);

// The values in both. A finite set keeps its order (the left one's when both
// are finite); the result takes the left one's kind. Domains of different
// value types (a bool and a number) share no value.
ValueDomain intersect(const ValueDomain& a, const ValueDomain& b);

bool is_empty(const ValueDomain& domain);
bool contains(const ValueDomain& domain, const Value& value);
// Whether `value` has the type `kind` describes (bool, double or string).
bool has_kind(const Value& value, ValueKind kind);

// As a condition writes it after DEVICE.ATTR: "== on", "in {18, 20}",
// "in 18..24", "> 20 and <= 30 and != 25", "!= \"eco\"", "any value",
// "no value".
std::string format_domain(const ValueDomain& domain);
// One value as a condition writes it: on, true, 21.5, "eco".
std::string format_value(ValueKind kind, const Value& value);

}  // namespace mesh::routine
