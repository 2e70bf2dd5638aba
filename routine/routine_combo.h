#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/expected.h"
#include "proto/invocation.pb.h"
#include "routine/catalog.h"
#include "routine/command_deduction.h"
#include "routine/routine_model.h"

namespace mesh::routine {

// A routine run as APEX combos (apex.md §2, §6, §7.1): each of its commands
// is a subject command, preceded by the precondition commands its PEG asks
// for, deduced from the devices' states once every variable is reserved.
//
// Why the routine leader is the pivot, and why ordered locking is its
// conservative strategy. §7.1 reserves every PEG variable before any
// command runs and holds all of them to the end (conservative strict 2PL),
// and prevents deadlock by preemption (wound-wait on start time). The
// routine layer already has a conservative strict 2PL: SLA takes every
// device lock of the invocation, one at a time in device id order, before
// its first command, and releases them only at its end. Reserving the
// PEG's devices with it is §7.1.1's third option ("breaking circular
// wait": reserve in the order of the variables' identities), which the
// paper grants is deadlock-free and rejects only for its latency (one
// reservation round trip per variable instead of all at once). So:
//  - reservation: the invocation's lock set is its commands' devices plus
//    every device of their PEGs (combo_devices), locked like any other;
//  - no contention failure once executing: every lock is held before the
//    first command and none is given up before the end, so no other combo
//    can take a variable from it (the rule §7.1 states);
//  - no deadlock: locks are requested in one global order (SLA), or all at
//    once and all given back on a refusal (OLA);
//  - consistency (§2): while the combo runs, nobody else writes any of its
//    variables, so the states it deduced from stay true until its commands
//    change them, and each subject runs only after its preconditions (PEG
//    order, stage by stage). Rules on variables outside the PEG are not
//    affected by its commands.
// Locks are per device, coarser than the paper's per-variable reservation:
// two combos writing different attributes of one device run one after the
// other. That costs concurrency, never safety.
//
// When the states are read. The plan depends on the devices' states (a
// precondition that already holds needs no command), so it is deduced
// after every lock is held, from states read then, and committed in the
// routine's group before the first command: a new leader runs the same
// plan. The rules are read from the catalog twice, at reservation and at
// planning; if they changed in between so that the plan needs a device
// the invocation did not lock, the plan is refused (the invocation aborts
// and says why) rather than run unreserved.
//
// The plan lists only the precondition commands, each placed before the
// routine command it serves (expand() rebuilds the whole list), which keeps
// the committed step small.
//
// The aggressive strategy (§7.2, routine/routine_leaders.h) does not wait
// for every lock: it holds one stage at a time (stage_devices: a routine
// command's graph) and plans that stage alone (plan_stage) from the states
// read once its devices are held. Its precondition commands go after every
// command planned before, so no index that already ran moves. Consistency
// holds as above, per stage: while the stage runs nobody else writes its
// devices, and earlier stages' devices stay held to the end.

// A precondition command the plan inserts.
struct PreconditionCommand {
  uint32_t before = 0;  // the index of the routine command it serves
  std::string device;
  Attributes values;
  std::vector<std::string> rules;  // the rules that required it (for the history)
  // Runs alongside the command before it in the plan: the same stage of the
  // same precondition graph, where no rule orders them, on another device.
  bool with_previous = false;

  friend bool operator==(const PreconditionCommand&, const PreconditionCommand&) = default;
};

// One command of an invocation as it runs: a routine command, or a
// precondition command inserted before one.
struct ComboCommand {
  RoutineCommand command;
  // Set for a precondition command: the routine command (index) it serves.
  std::optional<uint32_t> serves;
  std::vector<std::string> rules;
  // As PreconditionCommand::with_previous (always false for a routine
  // command, which runs after every command before it).
  bool with_previous = false;

  friend bool operator==(const ComboCommand&, const ComboCommand&) = default;
};

// The devices of every PEG of the routine's commands (commands included),
// and whether any rule applies (false: the routine runs as written).
struct ComboReservation {
  std::set<std::string> devices;
  bool has_preconditions = false;
};
// The error names the routine command whose PEG cannot be built (conflicting
// rules, a cycle) or whose device is unknown.
core::Expected<ComboReservation, std::string> combo_devices(const RoutineSpec& spec, const Catalog& catalog);
// The same for routine command `index` alone: what the aggressive strategy
// must hold before that command's stage (its precondition commands and the
// command) runs.
core::Expected<ComboReservation, std::string> stage_devices(const RoutineSpec& spec, const Catalog& catalog,
                                                            size_t index);

// The rules whose graphs reach a command setting `values` on `device` (an
// ad hoc command's), in id order; empty when none apply. The error says
// why its graph cannot be built.
core::Expected<std::vector<std::string>, std::string> rules_for(const Catalog& catalog, const DeviceSpec& device,
                                                               const Attributes& values);

// The precondition commands of the routine, deduced from `states` (which
// must hold every device combo_devices names; a missing one is unknown).
// Commands run in order, and each later PEG is deduced from the states the
// earlier commands leave behind, so a precondition an earlier command (or
// precondition command) already made true costs no second command. The
// error says which command's combo could not be deduced and why.
core::Expected<std::vector<PreconditionCommand>, std::string> plan_preconditions(const RoutineSpec& spec,
                                                                                 const Catalog& catalog,
                                                                                 DeviceStates states,
                                                                                 const DeductionPolicy& policy);

// The precondition commands of routine command `index` alone, deduced from
// `states` as they are when its stage begins (the aggressive strategy plans
// each stage once it holds that stage's devices; every command before it
// has run). plan_preconditions is these stages in turn.
core::Expected<std::vector<PreconditionCommand>, std::string> plan_stage(const RoutineSpec& spec,
                                                                         const Catalog& catalog, size_t index,
                                                                         DeviceStates states,
                                                                         const DeductionPolicy& policy);

// The whole command list: for each routine command, the precondition
// commands placed before it (in plan order), then the command itself.
// Precondition commands are must commands without a duration.
std::vector<ComboCommand> expand(const RoutineSpec& spec, const std::vector<PreconditionCommand>& plan);

proto::PreconditionPlanMsg to_proto(const std::vector<PreconditionCommand>& plan);
// Commands with no device or no value are dropped (not something this code
// writes).
std::vector<PreconditionCommand> from_proto(const proto::PreconditionPlanMsg& msg);

}  // namespace mesh::routine
