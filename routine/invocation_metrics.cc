#include "routine/invocation_metrics.h"

#include <algorithm>
#include <chrono>

#include "routine/safehome_metrics.h"

namespace mesh::routine {
namespace {

core::TimePoint env_time_at_us(int64_t us) { return core::TimePoint(std::chrono::microseconds(us)); }

// The invocation's commands as SafeHome's schedule of it, if it ran every
// one (see InvocationMetrics::back_to_back), and whether each command's
// start is the one recorded (else each is taken to start when the one
// before it let go, the first at EXECUTING).
struct Schedule {
  ScheduledRoutine routine;
  bool recorded_starts = false;
};
std::optional<Schedule> as_safehome_schedule(const proto::InvocationMsg& invocation,
                                             const std::vector<core::Duration>& holds) {
  if (invocation.outcome() != proto::INVOCATION_OK || invocation.locked_at_us() <= 0 ||
      invocation.commands_size() != static_cast<int>(holds.size()) ||
      invocation.command_done_at_us_size() != invocation.commands_size()) {
    return std::nullopt;
  }
  Schedule schedule;
  schedule.recorded_starts = invocation.commands_size() > 0;
  for (const proto::CommandStep& command : invocation.commands()) {
    schedule.recorded_starts = schedule.recorded_starts && command.started_at_us() >= invocation.locked_at_us();
  }
  ScheduledRoutine& routine = schedule.routine;
  routine.arrival = env_time_at_us(invocation.triggered_at_us());
  core::TimePoint start = env_time_at_us(invocation.locked_at_us());
  for (int i = 0; i < invocation.commands_size(); ++i) {
    const proto::CommandStep& command = invocation.commands(i);
    const int64_t done_us = invocation.command_done_at_us(i);
    const core::TimePoint sent = schedule.recorded_starts ? env_time_at_us(command.started_at_us()) : start;
    if (command.index() != static_cast<uint32_t>(i) || done_us <= 0 || env_time_at_us(done_us) < sent) {
      return std::nullopt;
    }
    const core::Duration hold =
        command.status() == proto::COMMAND_OK ? holds[static_cast<size_t>(i)] : core::Duration{};
    // A command of a run (routine/routine_combo.h) went out before the one
    // before it was done: the time they overlap counts once.
    const core::TimePoint begins = std::max(sent, start);
    const core::TimePoint end = std::max(begins, env_time_at_us(done_us) + hold);
    routine.commands.push_back({{}, begins, end});
    start = end;
  }
  return schedule;
}

}  // namespace

InvocationMetrics invocation_metrics(const proto::InvocationMsg& invocation, const std::vector<core::Duration>& holds) {
  InvocationMetrics metrics;
  metrics.rollback_commands = static_cast<size_t>(invocation.undone_size());
  const bool triggered = invocation.triggered_at_us() > 0;
  if (triggered && invocation.locked_at_us() >= invocation.triggered_at_us()) {
    metrics.wait = std::chrono::microseconds(invocation.locked_at_us() - invocation.triggered_at_us());
  }
  if (triggered && invocation.phase() == proto::PHASE_DONE &&
      invocation.ended_at_us() >= invocation.triggered_at_us()) {
    metrics.end_to_end = std::chrono::microseconds(invocation.ended_at_us() - invocation.triggered_at_us());
  }
  if (const auto scheduled = as_safehome_schedule(invocation, holds)) {
    metrics.back_to_back = back_to_back(scheduled->routine);
    if (scheduled->recorded_starts) metrics.stretch = ev_stretch(scheduled->routine);
  }
  if (metrics.end_to_end && metrics.back_to_back && *metrics.back_to_back > core::Duration::zero()) {
    metrics.latency_overhead =
        static_cast<double>(metrics.end_to_end->count()) / static_cast<double>(metrics.back_to_back->count());
  }
  return metrics;
}

std::vector<core::Duration> command_holds(const RoutineSpec& spec, const std::vector<PreconditionCommand>& plan) {
  std::vector<core::Duration> holds;
  for (const auto& command : expand(spec, plan)) holds.push_back(command.command.duration.value_or(core::Duration{}));
  return holds;
}

}  // namespace mesh::routine
