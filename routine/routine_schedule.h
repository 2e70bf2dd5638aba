#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"
#include "routine/routine_model.h"

namespace mesh::routine {

// One invocation of a routine, numbered in arrival order (safehome.md §4.2:
// "when a routine is added [to the wait queue], it is assigned an
// incremented routine ID"). Order mismatch compares against this order.
using InvocationId = uint64_t;

// A command as a scheduler sees it: the device whose lock it needs and how
// long it keeps that device.
struct PlannedCommand {
  std::string device;
  core::Duration duration{};

  friend bool operator==(const PlannedCommand&, const PlannedCommand&) = default;
};

// SafeHome's estimate for a command without a known running time (§4.3:
// "a fixed tau = tau_timeout for all short commands (100ms ...)").
inline constexpr core::Duration kShortCommandEstimate = std::chrono::milliseconds(100);

// The commands of `spec` in order: a command with a duration keeps its
// device that long (a sprinkler on for 15 minutes), any other one
// `short_command`.
std::vector<PlannedCommand> plan_commands(const RoutineSpec& spec,
                                          core::Duration short_command = kShortCommandEstimate);

// A routine waiting to be scheduled.
struct RoutineArrival {
  InvocationId id = 0;
  core::TimePoint arrival{};
  std::vector<PlannedCommand> commands;
};

// Where a command runs: on `device` during [start, end).
struct PlacedCommand {
  std::string device;
  core::TimePoint start{};
  core::TimePoint end{};

  friend bool operator==(const PlacedCommand&, const PlacedCommand&) = default;
};

// A routine as a schedule runs it: its commands in routine order.
struct ScheduledRoutine {
  InvocationId id = 0;
  core::TimePoint arrival{};
  std::vector<PlacedCommand> commands;

  friend bool operator==(const ScheduledRoutine&, const ScheduledRoutine&) = default;
};

}  // namespace mesh::routine
