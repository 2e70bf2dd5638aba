#include "routine/routine_combo.h"

#include <algorithm>

#include <fmt/format.h>

#include "routine/device_codec.h"
#include "routine/fault_points.h"
#include "routine/precondition_graph.h"

namespace mesh::routine {
namespace {

// The PEG of one attribute a routine command sets.
core::Expected<PreconditionGraph, std::string> graph_of(const RoutineSpec& spec, size_t index,
                                                        const std::string& attribute, const Value& value,
                                                        const Catalog& catalog) {
  const RoutineCommand& command = spec.commands[index];
  const DeviceSpec* device = catalog.find(command.device);
  if (device == nullptr) {
    return core::Unexpected(fmt::format("command {}: no device {} in the catalog", index + 1, command.device));
  }
  auto subject = command_condition(*device, attribute, value);
  if (!subject) return core::Unexpected(fmt::format("command {}: {}", index + 1, subject.error()));
  auto graph = build_graph(*subject, catalog.precondition_rules());
  if (!graph) return core::Unexpected(fmt::format("command {} ({}): {}", index + 1, subject->text(), graph.error()));
  return graph;
}

// Adds the devices of command `index`'s PEGs to `out`.
std::optional<std::string> add_stage_devices(const RoutineSpec& spec, const Catalog& catalog, size_t index,
                                             ComboReservation& out) {
  out.devices.insert(spec.commands[index].device);
  if (catalog.precondition_rules().empty()) return std::nullopt;
  for (const auto& [attribute, value] : spec.commands[index].values) {
    auto graph = graph_of(spec, index, attribute, value, catalog);
    if (!graph) return graph.error();
    if (graph->vertices.size() > 1) out.has_preconditions = true;
    for (const auto& vertex : graph->vertices) out.devices.insert(vertex.condition.variable.device);
  }
  return std::nullopt;
}

// Appends command `index`'s precondition commands to `plan`, deduced from
// `states`, and leaves in `states` what they and the command set.
std::optional<std::string> plan_stage_into(const RoutineSpec& spec, const Catalog& catalog, size_t index,
                                           DeviceStates& states, const DeductionPolicy& policy,
                                           std::vector<PreconditionCommand>& plan) {
  const RoutineCommand& command = spec.commands[index];
  for (const auto& [attribute, value] : command.values) {
    auto graph = graph_of(spec, index, attribute, value, catalog);
    if (!graph) return graph.error();
    if (graph->vertices.size() == 1) continue;
    auto combo = deduce(*graph, policy, states);
    if (!combo) {
      return fmt::format("command {} ({}): {}", index + 1, graph->vertices.front().condition.text(), combo.error());
    }
    std::set<std::string> stage_devices_sent;  // this stage's commands so far: emptied at each stage
    for (const auto& stage : combo->stages) {
      if (!fault_points().runs_span_stages) stage_devices_sent.clear();
      for (const PlanStep& step : stage) {
        if (step.subject) continue;
        if (step.action == StepAction::check) {
          // Every device of the PEG was read before planning: a reading
          // still unknown could not be read, so it cannot be checked.
          return fmt::format("command {}: {} could not be read, so [{}] {} cannot be checked", index + 1,
                             step.variable.text(), step.vertex, step.condition);
        }
        if (step.action != StepAction::set) continue;
        // A stage's steps have no order among them (command_deduction.h);
        // two on one device stay in turn, as a device runs one command at a time.
        const bool with_previous = !stage_devices_sent.empty() && stage_devices_sent.count(step.variable.device) == 0;
        stage_devices_sent.insert(step.variable.device);
        plan.push_back({static_cast<uint32_t>(index), step.variable.device,
                        Attributes{{step.variable.attribute, step.value}}, graph->vertices[step.vertex].required_by,
                        with_previous});
        states[step.variable.device][step.variable.attribute] = step.value;
      }
    }
  }
  for (const auto& [attribute, value] : command.values) states[command.device][attribute] = value;
  return std::nullopt;
}

}  // namespace

core::Expected<ComboReservation, std::string> combo_devices(const RoutineSpec& spec, const Catalog& catalog) {
  ComboReservation out;
  for (size_t i = 0; i < spec.commands.size(); ++i) {
    if (auto problem = add_stage_devices(spec, catalog, i, out)) return core::Unexpected(std::move(*problem));
  }
  return out;
}

core::Expected<ComboReservation, std::string> stage_devices(const RoutineSpec& spec, const Catalog& catalog,
                                                            size_t index) {
  ComboReservation out;
  if (index >= spec.commands.size()) return out;
  if (auto problem = add_stage_devices(spec, catalog, index, out)) return core::Unexpected(std::move(*problem));
  return out;
}

core::Expected<std::vector<PreconditionCommand>, std::string> plan_preconditions(const RoutineSpec& spec,
                                                                                 const Catalog& catalog,
                                                                                 DeviceStates states,
                                                                                 const DeductionPolicy& policy) {
  std::vector<PreconditionCommand> plan;
  for (size_t i = 0; i < spec.commands.size(); ++i) {
    if (auto problem = plan_stage_into(spec, catalog, i, states, policy, plan)) {
      return core::Unexpected(std::move(*problem));
    }
  }
  return plan;
}

core::Expected<std::vector<PreconditionCommand>, std::string> plan_stage(const RoutineSpec& spec,
                                                                         const Catalog& catalog, size_t index,
                                                                         DeviceStates states,
                                                                         const DeductionPolicy& policy) {
  std::vector<PreconditionCommand> plan;
  if (index >= spec.commands.size()) return plan;
  if (auto problem = plan_stage_into(spec, catalog, index, states, policy, plan)) {
    return core::Unexpected(std::move(*problem));
  }
  return plan;
}

core::Expected<std::vector<std::string>, std::string> rules_for(const Catalog& catalog, const DeviceSpec& device,
                                                               const Attributes& values) {
  std::set<std::string> rules;
  if (catalog.precondition_rules().empty()) return std::vector<std::string>{};
  for (const auto& [attribute, value] : values) {
    auto subject = command_condition(device, attribute, value);
    if (!subject) return core::Unexpected(subject.error());
    auto graph = build_graph(*subject, catalog.precondition_rules());
    if (!graph) return core::Unexpected(fmt::format("{}: {}", subject->text(), graph.error()));
    for (const auto& vertex : graph->vertices) rules.insert(vertex.required_by.begin(), vertex.required_by.end());
  }
  return std::vector<std::string>(rules.begin(), rules.end());
}

std::vector<ComboCommand> expand(const RoutineSpec& spec, const std::vector<PreconditionCommand>& plan) {
  std::vector<ComboCommand> out;
  out.reserve(spec.commands.size() + plan.size());
  size_t next = 0;
  for (uint32_t i = 0; i < spec.commands.size(); ++i) {
    for (; next < plan.size() && plan[next].before <= i; ++next) {
      RoutineCommand command;
      command.device = plan[next].device;
      command.values = plan[next].values;
      out.push_back({std::move(command), plan[next].before, plan[next].rules, plan[next].with_previous});
    }
    out.push_back({spec.commands[i], std::nullopt, {}});
  }
  return out;
}

proto::PreconditionPlanMsg to_proto(const std::vector<PreconditionCommand>& plan) {
  proto::PreconditionPlanMsg msg;
  for (const auto& command : plan) {
    auto& out = *msg.add_commands();
    out.set_before(command.before);
    out.set_device(command.device);
    to_proto(command.values, *out.mutable_values());
    for (const auto& rule : command.rules) out.add_rules(rule);
    if (command.with_previous && msg.runs_size() > 0) {
      msg.set_runs(msg.runs_size() - 1, msg.runs(msg.runs_size() - 1) + 1);
    } else {
      msg.add_runs(1);
    }
  }
  // Every command alone: nothing to say.
  if (std::all_of(msg.runs().begin(), msg.runs().end(), [](uint32_t run) { return run == 1; })) msg.clear_runs();
  return msg;
}

std::vector<PreconditionCommand> from_proto(const proto::PreconditionPlanMsg& msg) {
  std::vector<PreconditionCommand> plan;
  // Whether each command joins the run of the one before, from the run
  // lengths; any other count than the commands' means one by one.
  std::vector<bool> joins(static_cast<size_t>(msg.commands_size()), false);
  uint64_t counted = 0;
  for (const uint32_t run : msg.runs()) counted += run;
  if (counted == joins.size()) {
    size_t at = 0;
    for (const uint32_t run : msg.runs()) {
      for (uint32_t i = 1; i < run; ++i) joins[at + i] = true;
      at += run;
    }
  }
  for (int i = 0; i < msg.commands_size(); ++i) {
    const auto& command = msg.commands(i);
    PreconditionCommand decoded{command.before(), command.device(), from_proto(command.values()),
                                {command.rules().begin(), command.rules().end()}};
    if (decoded.device.empty() || decoded.values.empty()) continue;
    // Only the same routine command's commands on other devices run beside
    // each other (executors also check every device of a run differs).
    decoded.with_previous = joins[static_cast<size_t>(i)] && !plan.empty() && plan.back().before == decoded.before &&
                            plan.back().device != decoded.device;
    plan.push_back(std::move(decoded));
  }
  return plan;
}

}  // namespace mesh::routine
