#include "agent/admin_routines.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/admin_response.h"
#include "routine/adhoc_combo.h"
#include "routine/invocation_metrics.h"
#include "routine/routine_combo.h"
#include "routine/routine_leaders.h"
#include "routine/routine_model.h"

namespace mesh::agent {
namespace {

std::string describe_values(const routine::DeviceSpec* device, const routine::Attributes& values) {
  if (device != nullptr) return routine::format_attributes(device->kind, values);
  std::vector<std::string> pairs;
  for (const auto& [name, value] : values) pairs.push_back(fmt::format("{}={}", name, routine::format_value(value)));
  return fmt::format("{}", fmt::join(pairs, " "));
}

// "DEVICE ATTR=VALUE ... [for S s] [undo ATTR=VALUE ...] [(best effort)]"
std::string describe_command(const routine::RoutineCommand& command, const routine::Catalog& catalog) {
  const routine::DeviceSpec* device = catalog.find(command.device);
  std::string text = command.device + " " + describe_values(device, command.values);
  if (command.duration) text += fmt::format(" for {} s", core::to_seconds(*command.duration));
  if (!command.undo.empty()) text += " undo " + describe_values(device, command.undo);
  if (!command.must) text += " (best effort)";
  return text;
}

proto::InvocationMetricsMsg describe_metrics(const routine::RoutineSpec& spec, const proto::InvocationMsg& invocation) {
  // The command durations are the catalog's: for an invocation of another
  // definition they may not be the ones it ran with, so none are given.
  std::vector<core::Duration> holds;
  if (invocation.definition() == 0 || invocation.definition() == routine::definition_digest(spec)) {
    holds = routine::command_holds(spec, invocation.has_plan() ? routine::from_proto(invocation.plan())
                                                               : std::vector<routine::PreconditionCommand>{});
  }
  const routine::InvocationMetrics metrics = routine::invocation_metrics(invocation, holds);
  const auto us = [](core::Duration duration) { return static_cast<uint64_t>(duration.count()); };
  proto::InvocationMetricsMsg out;
  out.set_seq(invocation.seq());
  if (metrics.wait) out.set_wait_us(us(*metrics.wait));
  if (metrics.end_to_end) out.set_end_to_end_us(us(*metrics.end_to_end));
  if (metrics.back_to_back) out.set_back_to_back_us(us(*metrics.back_to_back));
  if (metrics.latency_overhead) out.set_latency_overhead(*metrics.latency_overhead);
  if (metrics.stretch) out.set_stretch(*metrics.stretch);
  out.set_rollback_commands(static_cast<uint32_t>(metrics.rollback_commands));
  return out;
}

std::string describe_trigger(const routine::RoutineSpec& spec) {
  std::string text = spec.trigger_text;
  if (spec.trigger.window) text += " during " + routine::format_window(*spec.trigger.window);
  if (!spec.trigger.days.every()) {
    text += " on " + fmt::format("{}", fmt::join(routine::format_days(spec.trigger.days), ","));
  }
  return text;
}

}  // namespace

void AdminRoutines::list(const proto::RoutinesRequest& request, Reply reply) {
  const routine::Catalog& catalog = node_.catalog();
  std::vector<std::string> ids(request.ids().begin(), request.ids().end());
  for (const auto& id : ids) {
    if (catalog.find_routine(id) == nullptr && !routine::is_adhoc_routine(id)) {
      reply(error_response(
          fmt::format("no routine {} in the catalog (meshctl routines lists them; adhoc:DEVICE names the ad hoc combos "
                      "meshctl device set ran on DEVICE)",
                      id)));
      return;
    }
  }
  const auto mesh_strategy = node_.config().routines.leaders.strategy;
  const auto visibility = node_.config().routines.leaders.visibility;
  const auto ev_scheduler = node_.config().routines.leaders.ev_scheduler;
  node_.routines().read(
      ids, timeout_of(request.timeout_ms()),
      [this, alive = alive_, mesh_strategy, visibility, ev_scheduler, reply = std::move(reply)](const auto& reads) {
        if (!*alive) return;
        const routine::Catalog& now = node_.catalog();
        proto::AdminResponse response;
        auto& out = *response.mutable_routines();
        for (const auto& read : reads) {
          const routine::RoutineSpec* spec = now.find_routine(read.routine);
          // Ad hoc combos' group: each invocation carries its own command.
          routine::RoutineSpec adhoc;
          adhoc.id = read.routine;
          adhoc.trigger_text = "ad hoc (meshctl device set)";
          adhoc.trigger.manual = true;
          if (spec == nullptr && routine::is_adhoc_routine(read.routine)) spec = &adhoc;
          if (spec == nullptr) continue;
          auto& row = *out.add_routines();
          row.set_id(spec->id);
          row.set_enabled(spec->enabled);
          row.set_trigger(describe_trigger(*spec));
          const auto strategy =
              spec->lock_strategy == routine::LockStrategy::mesh_default ? mesh_strategy : spec->lock_strategy;
          // Under WV no device is locked, and under EV serial keys order the
          // locks, whatever the strategy says.
          if (visibility == routine::Visibility::wv) {
            row.set_lock("none");
          } else if (visibility == routine::Visibility::ev) {
            row.set_lock(fmt::format("serial key ({})", routine::to_string(ev_scheduler)));
          } else {
            row.set_lock(std::string(routine::to_string(strategy)));
          }
          row.set_visibility(std::string(routine::to_string(visibility)));
          for (const auto& device : routine::command_devices(*spec)) row.add_devices(device);
          for (const auto& resource : spec->uses) row.add_uses(resource);
          for (const auto& command : spec->commands) row.add_commands(describe_command(command, now));
          row.set_min_retrigger_ms(static_cast<uint32_t>(
              std::chrono::duration_cast<std::chrono::milliseconds>(spec->min_retrigger).count()));
          if (const auto problem = now.routine_problems().find(spec->id); problem != now.routine_problems().end()) {
            row.set_problem(problem->second);
          }
          if (read.error) {
            row.set_error(*read.error);
          } else {
            row.set_leader(read.leader.to_string());
          }
          for (const auto& invocation : read.invocations) {
            const auto own = invocation.has_adhoc() ? routine::adhoc_from_proto(invocation.adhoc())
                                                    : core::Expected<routine::RoutineSpec, std::string>(*spec);
            const routine::RoutineSpec& ran = own ? *own : *spec;
            *row.add_invocations() = invocation;
            *row.add_metrics() = describe_metrics(ran, invocation);
            // An ad hoc combo's command is its own, not the row's: always listed.
            const bool planned = invocation.has_plan() && !invocation.plan().commands().empty();
            if (!planned && !invocation.has_adhoc()) continue;
            auto& combo = *row.add_combos();
            combo.set_seq(invocation.seq());
            for (const auto& command : routine::expand(ran, routine::from_proto(invocation.plan()))) {
              std::string text = describe_command(command.command, now);
              if (command.serves && *command.serves < ran.commands.size()) {
                text +=
                    fmt::format(" (precondition of routine command {}, {}: {})", *command.serves + 1,
                                describe_command(ran.commands[*command.serves], now), fmt::join(command.rules, ", "));
              }
              combo.add_commands(std::move(text));
            }
          }
          row.set_omitted_invocations(read.omitted);
        }
        reply(std::move(response));
      });
}

void AdminRoutines::run(const proto::RoutineRunRequest& request, Reply reply) {
  node_.routines().run(request.id(), request.wait(), timeout_of(request.timeout_ms()),
                       [alive = alive_, reply = std::move(reply)](const auto& result) {
                         if (!*alive) return;
                         if (!result) {
                           reply(error_response(result.error()));
                           return;
                         }
                         proto::AdminResponse response;
                         *response.mutable_routine_run()->mutable_invocation() = *result;
                         reply(std::move(response));
                       });
}

}  // namespace mesh::agent
