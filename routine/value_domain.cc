#include "routine/value_domain.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

bool bool_kind(ValueKind kind) { return kind == ValueKind::on_off || kind == ValueKind::boolean; }

// on_off and boolean values may meet: they are the same bool.
bool same_type(ValueKind a, ValueKind b) { return a == b || (bool_kind(a) && bool_kind(b)); }

bool above_low(const std::optional<Bound>& low, double x) {
  return !low || (low->inclusive ? x >= low->value : x > low->value);
}
bool below_high(const std::optional<Bound>& high, double x) {
  return !high || (high->inclusive ? x <= high->value : x < high->value);
}

bool whole(double x) { return x == std::floor(x); }

void make_empty(ValueDomain& domain) {
  domain.finite = true;
  domain.integer = false;
  domain.members.clear();
  domain.low.reset();
  domain.high.reset();
  domain.excluded.clear();
}

bool is_excluded(const ValueDomain& domain, const Value& value) {
  return std::binary_search(domain.excluded.begin(), domain.excluded.end(), value);
}

// Brings `domain` to the one form its set of values has (see the header).
void normalize(ValueDomain& domain) {
  if (domain.finite) {
    // A listed set says which numbers it holds; whole or not is no longer a
    // property of the domain.
    domain.integer = false;
    domain.low.reset();
    domain.high.reset();
    domain.excluded.clear();
    return;
  }
  std::sort(domain.excluded.begin(), domain.excluded.end());
  domain.excluded.erase(std::unique(domain.excluded.begin(), domain.excluded.end()), domain.excluded.end());
  if (domain.kind != ValueKind::number) {
    domain.low.reset();
    domain.high.reset();
    return;
  }
  if (domain.integer) {
    if (domain.low) {
      double first = std::ceil(domain.low->value);
      if (!domain.low->inclusive && first == domain.low->value) first += 1;
      domain.low = Bound{first, true};
    }
    if (domain.high) {
      double last = std::floor(domain.high->value);
      if (!domain.high->inclusive && last == domain.high->value) last -= 1;
      domain.high = Bound{last, true};
    }
  }
  std::erase_if(domain.excluded, [&](const Value& point) {
    const auto* x = std::get_if<double>(&point);
    return x == nullptr || !above_low(domain.low, *x) || !below_high(domain.high, *x) || (domain.integer && !whole(*x));
  });
  if (!domain.low || !domain.high) return;
  const double low = domain.low->value;
  const double high = domain.high->value;
  if (low > high || (low == high && !(domain.low->inclusive && domain.high->inclusive))) {
    make_empty(domain);
    return;
  }
  // At most one value left: list it, so "in 20..20" and "== 20" are one domain.
  const bool one_point = low == high;
  const bool at_most_one_whole = domain.integer && high - low + 1 <= static_cast<double>(domain.excluded.size()) + 1;
  if (one_point || at_most_one_whole) {
    // Counted, not stepped by x += 1, which stalls where doubles are
    // further apart than 1.
    const auto candidates = static_cast<size_t>(high - low) + 1;
    std::vector<Value> left;
    for (size_t i = 0; i < candidates && left.empty(); ++i) {
      const double x = low + static_cast<double>(i);
      if (x <= high && !is_excluded(domain, Value{x})) left.emplace_back(x);
    }
    domain.finite = true;
    domain.members = std::move(left);
    normalize(domain);
  }
}

std::optional<Bound> tighter_low(const std::optional<Bound>& a, const std::optional<Bound>& b) {
  if (!a) return b;
  if (!b) return a;
  if (a->value != b->value) return a->value > b->value ? a : b;
  return Bound{a->value, a->inclusive && b->inclusive};
}

std::optional<Bound> tighter_high(const std::optional<Bound>& a, const std::optional<Bound>& b) {
  if (!a) return b;
  if (!b) return a;
  if (a->value != b->value) return a->value < b->value ? a : b;
  return Bound{a->value, a->inclusive && b->inclusive};
}

ValueDomain filtered(ValueDomain finite, const ValueDomain& by, ValueKind kind) {
  finite.kind = kind;
  std::erase_if(finite.members, [&](const Value& member) { return !contains(by, member); });
  return finite;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

}  // namespace

std::string_view to_string(ValueKind kind) {
  switch (kind) {
    case ValueKind::on_off:
      return "on or off";
    case ValueKind::boolean:
      return "true or false";
    case ValueKind::number:
      return "a number";
    case ValueKind::text:
      return "a \"quoted string\"";
  }
  return "?";
}

bool has_kind(const Value& value, ValueKind kind) {
  switch (kind) {
    case ValueKind::on_off:
    case ValueKind::boolean:
      return std::holds_alternative<bool>(value);
    case ValueKind::number:
      return std::holds_alternative<double>(value);
    case ValueKind::text:
      return std::holds_alternative<std::string>(value);
  }
  return false;
}

ValueDomain any_value(ValueKind kind, bool integer) {
  if (bool_kind(kind)) return one_of(kind, {Value{false}, Value{true}});
  ValueDomain domain;
  domain.kind = kind;
  domain.integer = kind == ValueKind::number && integer;
  return domain;
}

ValueDomain one_of(ValueKind kind, std::vector<Value> values) {
  ValueDomain domain;
  domain.kind = kind;
  domain.finite = true;
  for (auto& value : values) {
    if (has_kind(value, kind) &&
        std::find(domain.members.begin(), domain.members.end(), value) == domain.members.end()) {
      domain.members.push_back(std::move(value));
    }
  }
  return domain;
}

ValueDomain between(std::optional<Bound> low, std::optional<Bound> high, bool integer) {
  ValueDomain domain;
  domain.kind = ValueKind::number;
  domain.low = low;
  domain.high = high;
  domain.integer = integer;
  normalize(domain);
  return domain;
}

ValueDomain without(ValueDomain domain, const Value& value) {
  if (domain.finite) {
    std::erase(domain.members, value);
  } else if (contains(domain, value)) {
    domain.excluded.push_back(value);
    normalize(domain);
  }
  return domain;
}

ValueDomain intersect(const ValueDomain& a, const ValueDomain& b) {
  if (!same_type(a.kind, b.kind)) {
    ValueDomain none;
    none.kind = a.kind;
    make_empty(none);
    return none;
  }
  if (a.finite) return filtered(a, b, a.kind);
  if (b.finite) return filtered(b, a, a.kind);
  ValueDomain out;
  out.kind = a.kind;
  out.integer = a.integer || b.integer;
  out.low = tighter_low(a.low, b.low);
  out.high = tighter_high(a.high, b.high);
  out.excluded = a.excluded;
  out.excluded.insert(out.excluded.end(), b.excluded.begin(), b.excluded.end());
  normalize(out);
  return out;
}

bool is_empty(const ValueDomain& domain) { return domain.finite && domain.members.empty(); }

bool contains(const ValueDomain& domain, const Value& value) {
  if (!has_kind(value, domain.kind)) return false;
  if (domain.finite) return std::find(domain.members.begin(), domain.members.end(), value) != domain.members.end();
  if (const auto* x = std::get_if<double>(&value)) {
    if (!std::isfinite(*x) || !above_low(domain.low, *x) || !below_high(domain.high, *x)) return false;
    if (domain.integer && !whole(*x)) return false;
  }
  return !is_excluded(domain, value);
}

std::string format_value(ValueKind kind, const Value& value) {
  if (const auto* flag = std::get_if<bool>(&value)) {
    if (kind == ValueKind::on_off) return *flag ? "on" : "off";
    return *flag ? "true" : "false";
  }
  if (const auto* text = std::get_if<std::string>(&value)) return quoted(*text);
  return format_value(value);
}

std::string format_domain(const ValueDomain& domain) {
  if (domain.finite) {
    if (domain.members.empty()) return "no value";
    if (domain.members.size() == 1) return "== " + format_value(domain.kind, domain.members.front());
    std::string out = "in {";
    for (size_t i = 0; i < domain.members.size(); ++i) {
      out += (i == 0 ? "" : ", ") + format_value(domain.kind, domain.members[i]);
    }
    return out + "}";
  }
  std::vector<std::string> parts;
  if (domain.low && domain.high && domain.low->inclusive && domain.high->inclusive) {
    parts.push_back(
        fmt::format("in {}..{}", format_value(Value{domain.low->value}), format_value(Value{domain.high->value})));
  } else {
    if (domain.low) {
      parts.push_back(fmt::format("{} {}", domain.low->inclusive ? ">=" : ">", format_value(Value{domain.low->value})));
    }
    if (domain.high) {
      parts.push_back(
          fmt::format("{} {}", domain.high->inclusive ? "<=" : "<", format_value(Value{domain.high->value})));
    }
  }
  for (const auto& point : domain.excluded) parts.push_back("!= " + format_value(domain.kind, point));
  if (parts.empty()) return "any value";
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : " and ") + part;
  return out;
}

}  // namespace mesh::routine
