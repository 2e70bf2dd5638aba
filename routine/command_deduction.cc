#include "routine/command_deduction.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The values of one piece of an interval that a command may write: all of
// [first, last] for a real attribute, its whole numbers for an integer one.
struct Piece {
  double first = 0;
  double last = 0;
};

// The interval of a numeric domain cut at its excluded points, each part
// reduced to the values a command may write (see the header).
std::vector<Piece> pieces(const ValueDomain& domain, double resolution) {
  std::vector<double> cuts;
  for (const auto& point : domain.excluded) cuts.push_back(std::get<double>(point));
  std::vector<Piece> out;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const std::optional<Bound> low = i == 0 ? domain.low : std::optional<Bound>(Bound{cuts[i - 1], false});
    const std::optional<Bound> high = i == cuts.size() ? domain.high : std::optional<Bound>(Bound{cuts[i], false});
    Piece piece{-kInfinity, kInfinity};
    if (domain.integer) {
      if (low) piece.first = low->inclusive ? std::ceil(low->value) : std::floor(low->value) + 1;
      if (high) piece.last = high->inclusive ? std::floor(high->value) : std::ceil(high->value) - 1;
    } else {
      if (low) piece.first = low->inclusive ? low->value : low->value + resolution;
      if (high) piece.last = high->inclusive ? high->value : high->value - resolution;
      if (low && high && piece.first > piece.last && low->value < high->value) {
        piece.first = piece.last = low->value + (high->value - low->value) / 2;
      }
    }
    if (piece.first <= piece.last) out.push_back(piece);
  }
  return out;
}

// The writable value nearest `target`; on a tie, the lower.
double closest(const std::vector<Piece>& parts, double target, bool integer) {
  double best = 0;
  double best_distance = kInfinity;
  for (const Piece& piece : parts) {
    const double clamped = std::clamp(target, piece.first, piece.last);
    std::vector<double> candidates = {clamped};
    if (integer) candidates = {std::max(piece.first, std::floor(clamped)), std::min(piece.last, std::ceil(clamped))};
    for (double candidate : candidates) {
      const double distance = std::abs(candidate - target);
      if (distance < best_distance || (distance == best_distance && candidate < best)) {
        best = candidate;
        best_distance = distance;
      }
    }
  }
  return best;
}

double midpoint(const std::vector<Piece>& parts, bool integer) {
  const double first = parts.front().first;
  const double last = parts.back().last;
  double target = 0;
  if (std::isfinite(first) && std::isfinite(last)) {
    target = first + (last - first) / 2;
  } else if (std::isfinite(first)) {
    target = first;
  } else if (std::isfinite(last)) {
    target = last;
  }
  return closest(parts, target, integer);
}

core::Expected<Value, std::string> choose_number(const ValueDomain& domain, const std::optional<Value>& current,
                                                 const DeductionPolicy& policy) {
  const auto parts = pieces(domain, policy.resolution);
  if (parts.empty()) return core::Unexpected(std::string("no value can be written inside it"));
  switch (policy.interval) {
    case IntervalChoice::closest_to_current:
      if (const auto* now = current ? std::get_if<double>(&*current) : nullptr; now != nullptr && std::isfinite(*now)) {
        return Value{closest(parts, *now, domain.integer)};
      }
      return Value{midpoint(parts, domain.integer)};
    case IntervalChoice::lowest:
      if (!std::isfinite(parts.front().first)) {
        return core::Unexpected(std::string("it has no lowest value; bound it from below, or pick another policy"));
      }
      return Value{parts.front().first};
    case IntervalChoice::highest:
      if (!std::isfinite(parts.back().last)) {
        return core::Unexpected(std::string("it has no highest value; bound it from above, or pick another policy"));
      }
      return Value{parts.back().last};
    case IntervalChoice::midpoint:
      return Value{midpoint(parts, domain.integer)};
  }
  return core::Unexpected(std::string("unknown interval policy"));
}

std::optional<Value> current_value(const DeviceStates& states, const AttributeCondition& condition) {
  const auto device = states.find(condition.variable.device);
  if (device == states.end()) return std::nullopt;
  const auto attribute = device->second.find(condition.variable.attribute);
  if (attribute == device->second.end() || !has_kind(attribute->second, condition.domain.kind)) return std::nullopt;
  return attribute->second;
}

std::string vertex_list(const std::vector<size_t>& vertices) {
  std::string out;
  for (size_t v : vertices) out += fmt::format("{}[{}]", out.empty() ? "" : ", ", v);
  return out;
}

}  // namespace

std::string_view to_string(IntervalChoice choice) {
  switch (choice) {
    case IntervalChoice::closest_to_current:
      return "closest_to_current";
    case IntervalChoice::lowest:
      return "lowest";
    case IntervalChoice::highest:
      return "highest";
    case IntervalChoice::midpoint:
      return "midpoint";
  }
  return "?";
}

std::optional<IntervalChoice> parse_interval_choice(std::string_view text) {
  for (auto choice : {IntervalChoice::closest_to_current, IntervalChoice::lowest, IntervalChoice::highest,
                      IntervalChoice::midpoint}) {
    if (to_string(choice) == text) return choice;
  }
  return std::nullopt;
}

std::string_view to_string(StepAction action) {
  switch (action) {
    case StepAction::set:
      return "set";
    case StepAction::hold:
      return "hold";
    case StepAction::check:
      return "check";
  }
  return "?";
}

core::Expected<Value, std::string> choose_value(const ValueDomain& domain, const std::optional<Value>& current,
                                                const DeductionPolicy& policy) {
  if (is_empty(domain)) return core::Unexpected(std::string("no value satisfies it"));
  if (domain.finite) return domain.members.front();
  if (domain.kind != ValueKind::number) {
    return core::Unexpected(
        std::string("it allows any text but some, so no value can be chosen; list the allowed values: in {...}"));
  }
  if (!(policy.resolution > 0) || !std::isfinite(policy.resolution)) {
    return core::Unexpected(fmt::format("the policy's resolution {} is not a positive number", policy.resolution));
  }
  auto chosen = choose_number(domain, current, policy);
  if (chosen && !contains(domain, *chosen)) {
    return core::Unexpected(fmt::format("the value {} the policy picks is not inside it", format_value(*chosen)));
  }
  return chosen;
}

size_t CommandPlan::command_count() const {
  size_t count = 0;
  for (const auto& stage : stages) {
    count += static_cast<size_t>(
        std::count_if(stage.begin(), stage.end(), [](const PlanStep& step) { return step.action == StepAction::set; }));
  }
  return count;
}

std::string CommandPlan::describe() const {
  size_t steps = 0;
  for (const auto& stage : stages) steps += stage.size();
  std::string out = fmt::format("plan: {} steps in {} stages, {} commands\n", steps, stages.size(), command_count());
  for (size_t s = 0; s < stages.size(); ++s) {
    out += fmt::format("stage {}\n", s + 1);
    for (const PlanStep& step : stages[s]) {
      const std::string value = step.action == StepAction::check ? "" : " = " + format_value(step.kind, step.value);
      std::string notes = step.subject ? ", subject" : "";
      if (!step.after.empty()) notes += ", after " + vertex_list(step.after);
      out += fmt::format("  {} {}{}  [{}] {}{}\n", to_string(step.action), step.variable.text(), value, step.vertex,
                         step.condition, notes);
    }
  }
  return out;
}

core::Expected<CommandPlan, std::string> deduce(const PreconditionGraph& graph, const DeductionPolicy& policy,
                                                const DeviceStates& states) {
  if (graph.vertices.empty()) return core::Unexpected(std::string("the precondition graph is empty"));
  const auto levels = graph.levels();
  size_t placed = 0;
  for (const auto& level : levels) placed += level.size();
  if (placed != graph.vertices.size()) {
    return core::Unexpected(std::string("the precondition graph has a cycle, so no order runs it"));
  }
  CommandPlan plan;
  for (const auto& level : levels) {
    std::vector<PlanStep> stage;
    for (size_t v : level) {
      const PegVertex& vertex = graph.vertices[v];
      const AttributeCondition& condition = vertex.condition;
      PlanStep step;
      step.vertex = v;
      step.variable = condition.variable;
      step.kind = condition.domain.kind;
      step.condition = condition.text();
      step.after = graph.preconditions_of(v);
      step.subject = vertex.subject;
      const auto current = current_value(states, condition);
      if (!vertex.subject && current && contains(condition.domain, *current)) {
        step.action = StepAction::hold;
        step.value = *current;
      } else if (!condition.settable) {
        if (current) {
          return core::Unexpected(fmt::format(
              "[{}] {} is a reading, now {}, and must be {} before its dependents run; no command can change it", v,
              condition.variable.text(), format_value(condition.domain.kind, *current),
              format_domain(condition.domain)));
        }
        step.action = StepAction::check;
      } else {
        auto value = choose_value(condition.domain, current, policy);
        if (!value) return core::Unexpected(fmt::format("[{}] {}: {}", v, condition.text(), value.error()));
        step.action = StepAction::set;
        step.value = std::move(*value);
      }
      stage.push_back(std::move(step));
    }
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

}  // namespace mesh::routine
