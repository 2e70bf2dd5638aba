#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "core/time.h"
#include "proto/routine.pb.h"
#include "routine/device_model.h"
#include "routine/trigger.h"

namespace mesh::routine {

// How a routine takes its device locks (comesh.md §4.2): the mesh's setting,
// or its own.
enum class LockStrategy {
  mesh_default,  // written "default"
  sla,           // one lock at a time, in increasing device id
  ola,           // all at once; on a refusal release all and retry later
  // APEX's aggressive strategy (apex.md §7.2, routine/routine_leaders.h):
  // every lock asked for at once, queued, and each command run as soon as
  // the locks its stage needs are held; an older invocation can wound it.
  aggressive,
};
std::string_view to_string(LockStrategy strategy);
std::optional<LockStrategy> parse_lock_strategy(std::string_view text);

// One step of a routine: set `values` on `device`. With a duration the
// routine keeps the device (its lock) that long after the command, e.g. a
// sprinkler on for 20 minutes. A command that is not `must` is best effort:
// its failure does not fail the routine.
//
// `undo` (SafeHome §2.2: a rollback restores the prior state "or a
// user-given undo value") is for commands whose prior state is the wrong
// thing to restore: a test alarm that was already blaring, a sprinkler run
// that must end off whatever it was. It names only attributes the command
// sets (see rollback_values for why).
struct RoutineCommand {
  std::string device;
  Attributes values;
  std::optional<core::Duration> duration;
  bool must = true;
  Attributes undo;  // empty: a rollback restores the values recorded before the command

  friend bool operator==(const RoutineCommand&, const RoutineCommand&) = default;
};

// CoMesh's default: a routine does not fire again within 10 s of its last
// invocation, however often its trigger flips.
inline constexpr core::Duration kDefaultMinRetrigger = std::chrono::seconds(10);
inline constexpr core::Duration kMaxMinRetrigger = std::chrono::hours(24 * 7);
inline constexpr core::Duration kMaxCommandDuration = std::chrono::hours(24);
inline constexpr size_t kMaxRoutineIdLength = 64;
inline constexpr size_t kMaxRoutineCommands = 32;
inline constexpr size_t kMaxRoutineUses = 8;
inline constexpr size_t kMaxResourceNameLength = 128;
// A run-time routine travels as one catalog change, one k-group update
// (kgroup ReplicaOptions::max_update_bytes, 700 by default, with the
// change's own fields): its encoded RoutineSpecMsg must fit in this.
inline constexpr size_t kMaxRoutineSpecBytes = 600;

// A routine as the catalog declares it.
struct RoutineSpec {
  std::string id;            // [a-z0-9_.-]+, at most kMaxRoutineIdLength
  std::string trigger_text;  // the condition as written
  Trigger trigger;           // parsed from trigger_text, with the window and days
  std::vector<RoutineCommand> commands;  // run in this order
  core::Duration min_retrigger = kDefaultMinRetrigger;
  bool enabled = true;
  std::vector<std::string> uses;  // mesh-wide resources (Camera), taken before the device locks
  LockStrategy lock_strategy = LockStrategy::mesh_default;

  // Two specs are equal when they define the same routine: the triggers are
  // compared as parsed, so spacing in trigger_text is no difference.
  friend bool operator==(const RoutineSpec& a, const RoutineSpec& b);
};

// Empty if `id` is a valid routine id, else what is wrong with it.
std::optional<std::string> check_routine_id(std::string_view id);

// Builds a trigger from a routine's three trigger fields (window and days
// may be empty: all day, every day). The error starts with the field:
// "trigger:1:14: ...", "window \"25:00-...\" ...", "days: ...".
core::Expected<Trigger, std::string> build_trigger(std::string_view text, std::string_view window,
                                                   const std::vector<std::string>& days);

// What is wrong with `spec` on its own (no catalog): its id, the trigger
// against its text, commands (at least one, at most kMaxRoutineCommands,
// valid device ids, at least one value, durations, an undo naming only
// attributes the command sets), uses, and a window or days on a manual
// routine. Each error starts "routine ID: ".
std::optional<std::string> check_definition(const RoutineSpec& spec);

// check_definition, then against the devices it may use: the trigger names
// devices and attributes of `devices` with values of their type, and every
// command sets writable attributes of a catalog device to allowed values,
// e.g. "routine night_hall: command 2: device hall_light: brightness=150 is
// not allowed: allowed is an integer 0..100", and so does its undo.
std::optional<std::string> check(const RoutineSpec& spec, const DeviceCatalog& devices);

// What a rollback sets to undo `command`, given the device's values
// recorded just before it ran (CommandOutcome.state_before, which holds the
// attributes the command sets that the device group knew). For each
// attribute the command sets: its undo value if `undo` names it, else its
// recorded value; an attribute in neither is left as it is. Empty: nothing
// is known to restore. Attributes the command did not set are never
// touched, which is why `undo` may not name them: the rollback undoes this
// command and nothing else, under the one lock it holds. A precondition
// command (routine/routine_combo.h) has no `undo`, so it always restores
// its recorded values: APEX chose them from the rules, not the user.
Attributes rollback_values(const RoutineCommand& command, const Attributes& state_before);

// The devices the routine's commands act on (the locks it takes).
std::set<std::string> command_devices(const RoutineSpec& spec);
// Whether the routine's trigger or a command names `device`.
bool names_device(const RoutineSpec& spec, const std::string& device);

// Conversions with the protobuf form. Decoding parses the trigger again and
// runs check_definition; the error says what is wrong.
proto::RoutineSpecMsg to_proto(const RoutineSpec& spec);
core::Expected<RoutineSpec, std::string> from_proto(const proto::RoutineSpecMsg& msg);

}  // namespace mesh::routine
