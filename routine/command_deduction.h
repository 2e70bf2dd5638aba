#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"
#include "routine/precondition_graph.h"

namespace mesh::routine {

// Deduces a combo from a PEG (apex.md §6.2): one step per vertex, the
// precondition commands in PEG order and the subject command last.
//
// Each precondition vertex becomes one step:
//   - hold:  the current state already satisfies its merged predicate, so
//            no command is sent; the variable stays in the plan because
//            execution (§7) still reserves it, or another combo could break
//            the precondition before the subject command runs;
//   - set:   a command writing a value chosen inside the predicate (below);
//   - check: the attribute is a reading (settable false) whose state is not
//            known here: the executor must read it and find it true before
//            the dependents run. A reading known to be false is an error,
//            since no command can make it true.
// Every precondition of the PEG is made true, also those under a vertex
// that already holds: by §2's transitive law they are the subject's
// preconditions too. The subject is always a `set` (it is the user's
// command), with its value chosen the same way when its condition is a
// range (§5.2 "possible subject conditions").
//
// Which value (§6.2 leaves it to policy). A finite set gives the first
// member in the order the rule writer listed it (after merging: the order
// of the first rule that required the variable); the current value never
// matters there, since a current value inside the set makes the step a
// hold. An interval follows the policy's IntervalChoice. Values of an
// interval are its whole numbers for an integer attribute; for a real one,
// an open end counts as the bound moved inwards by `resolution` (or the
// middle of the gap when it is narrower than that), as no real "lowest value
// above 20" exists. Points taken out by != split an interval into pieces;
// each is considered.
//
// Stages: the PEG's levels (PreconditionGraph::levels()), so the steps of
// one stage have no order among them and may run in parallel, and the
// subject alone is the last stage. Each step also lists the vertices it
// waits for, for an executor that runs the PEG as a dataflow (§7.1: a
// variable becomes valid for execution when its preconditions are done).
//
// The result is a pure function of (graph, policy, states).

enum class IntervalChoice {
  closest_to_current,  // the value nearest the current one (least change); midpoint when unknown
  lowest,
  highest,
  midpoint,  // nearest the middle of the interval; the finite end if one is unbounded, 0 if both
};
std::string_view to_string(IntervalChoice choice);
std::optional<IntervalChoice> parse_interval_choice(std::string_view text);

struct DeductionPolicy {
  IntervalChoice interval = IntervalChoice::closest_to_current;
  // Real-valued attributes: how far inside an open bound a chosen value
  // lies (0.5: the finest step of common thermostats).
  double resolution = 0.5;
};

// The devices' current attributes, by device id; a missing device or
// attribute is unknown.
using DeviceStates = std::map<std::string, Attributes>;

enum class StepAction { set, hold, check };
std::string_view to_string(StepAction action);

struct PlanStep {
  size_t vertex = 0;  // in the graph
  StepAction action = StepAction::set;
  Variable variable;
  ValueKind kind = ValueKind::number;
  Value value;                // set: the value written; hold: the current value
  std::string condition;      // the merged predicate, as text
  std::vector<size_t> after;  // the vertices this step waits for
  bool subject = false;

  friend bool operator==(const PlanStep&, const PlanStep&) = default;
};

struct CommandPlan {
  std::vector<std::vector<PlanStep>> stages;  // in order; the subject alone last

  // The commands to send, stage by stage (hold and check steps send none).
  size_t command_count() const;
  // A summary line, then per stage its number and one line per step:
  //   plan: 4 steps in 3 stages, 2 commands
  //   stage 1
  //     hold door.status = "closed"  [2] door.status == "closed"
  //     set curtain.status = "closed"  [3] curtain.status == "closed"
  //   stage 2
  //     hold window.status = "closed"  [1] window.status == "closed", after [3]
  std::string describe() const;

  friend bool operator==(const CommandPlan&, const CommandPlan&) = default;
};

// The value `policy` picks in `domain` given the current value (or none),
// or why none can be picked (an unbounded end where the policy needs it,
// text any-but-some, an empty domain).
core::Expected<Value, std::string> choose_value(const ValueDomain& domain, const std::optional<Value>& current,
                                                const DeductionPolicy& policy);

// The combo for `graph`. The error names the vertex whose value could not
// be chosen, or the reading that does not hold.
core::Expected<CommandPlan, std::string> deduce(const PreconditionGraph& graph, const DeductionPolicy& policy,
                                                const DeviceStates& states);

}  // namespace mesh::routine
