#include "agent/admin_preconditions.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "agent/admin_response.h"
#include "routine/command_deduction.h"
#include "routine/device_codec.h"
#include "routine/precondition_graph.h"

namespace mesh::agent {
namespace {

// How long reading the devices' states may take when the request says 0,
// as for meshctl devices.
constexpr uint32_t kDefaultStateReadMs = 5000;

// One condition to plan: what a command (or one of its assignments) makes
// true.
struct PlanSubject {
  std::string command;  // "hall_light power=on"
  routine::AttributeCondition condition;
};

// The subjects of `device set ID ATTR=VALUE...`, or why there are none.
core::Expected<std::vector<PlanSubject>, std::string> device_subjects(const routine::Catalog& catalog,
                                                                      const proto::PlanDeviceCommand& command) {
  const routine::DeviceSpec* spec = catalog.find(command.id());
  if (spec == nullptr) {
    return core::Unexpected(fmt::format("no device {} in the catalog (meshctl devices lists them)", command.id()));
  }
  if (command.assignments().empty()) {
    return core::Unexpected(fmt::format("plan device set {} needs ATTR=VALUE (e.g. power=on)", command.id()));
  }
  std::vector<PlanSubject> subjects;
  for (const std::string& assignment : command.assignments()) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      return core::Unexpected(fmt::format("'{}' is not ATTR=VALUE (e.g. power=on)", assignment));
    }
    const std::string name = assignment.substr(0, eq);
    const routine::AttributeSpec* attribute = routine::find_attribute(spec->kind, name);
    if (attribute == nullptr) return core::Unexpected(*routine::check_command(*spec, {{name, true}}));
    auto value = routine::parse_value(*attribute, std::string_view(assignment).substr(eq + 1));
    if (!value) return core::Unexpected(fmt::format("device {}: {}", spec->id, value.error()));
    auto condition = routine::command_condition(*spec, name, *value);
    if (!condition) return core::Unexpected(condition.error());
    subjects.push_back({fmt::format("{} {}", spec->id, routine::format_attributes(spec->kind, {{name, *value}})),
                        std::move(*condition)});
  }
  return subjects;
}

// The subjects of every command of a routine, in order; a command setting
// several attributes gives one per attribute.
core::Expected<std::vector<PlanSubject>, std::string> routine_subjects(const routine::Catalog& catalog,
                                                                       const std::string& id) {
  const routine::RoutineSpec* routine = catalog.find_routine(id);
  if (routine == nullptr) {
    return core::Unexpected(fmt::format("no routine {} in the catalog (meshctl routines lists them)", id));
  }
  std::vector<PlanSubject> subjects;
  for (const auto& command : routine->commands) {
    const routine::DeviceSpec* spec = catalog.find(command.device);
    if (spec == nullptr) {
      return core::Unexpected(
          fmt::format("routine {} cannot run: no device {} in the catalog", routine->id, command.device));
    }
    for (const auto& [name, value] : command.values) {
      auto condition = routine::command_condition(*spec, name, value);
      if (!condition) {
        return core::Unexpected(fmt::format("routine {} cannot run: {}", routine->id, condition.error()));
      }
      subjects.push_back({fmt::format("{} {}", spec->id, routine::format_attributes(spec->kind, {{name, value}})),
                          std::move(*condition)});
    }
  }
  return subjects;
}

void fill_graph(const routine::PreconditionGraph& graph, proto::CommandPlanMsg& out) {
  for (size_t v = 0; v < graph.vertices.size(); ++v) {
    proto::PlanVertex& vertex = *out.add_vertices();
    vertex.set_index(static_cast<uint32_t>(v));
    vertex.set_condition(graph.vertices[v].condition.text());
    for (const auto& rule : graph.vertices[v].required_by) vertex.add_required_by(rule);
    vertex.set_subject(graph.vertices[v].subject);
  }
  for (const auto& edge : graph.edges) {
    proto::PlanEdge& msg = *out.add_edges();
    msg.set_precondition(static_cast<uint32_t>(edge.precondition));
    msg.set_dependent(static_cast<uint32_t>(edge.dependent));
    for (const auto& rule : edge.rules) msg.add_rules(rule);
  }
  out.set_depth(static_cast<uint32_t>(graph.depth()));
}

void fill_combo(const routine::PreconditionGraph& graph, const routine::CommandPlan& plan, proto::CommandPlanMsg& out) {
  for (const auto& stage : plan.stages) {
    proto::PlanStage& stage_msg = *out.add_stages();
    for (const auto& step : stage) {
      proto::PlanStepMsg& msg = *stage_msg.add_steps();
      msg.set_action(std::string(routine::to_string(step.action)));
      msg.set_device(step.variable.device);
      msg.set_attribute(step.variable.attribute);
      if (step.action != routine::StepAction::check) msg.set_value(routine::format_value(step.kind, step.value));
      msg.set_condition(step.condition);
      msg.set_vertex(static_cast<uint32_t>(step.vertex));
      for (size_t after : step.after) msg.add_after(static_cast<uint32_t>(after));
      for (const auto& rule : graph.vertices[step.vertex].required_by) msg.add_rules(rule);
      msg.set_subject(step.subject);
    }
  }
  out.set_command_count(static_cast<uint32_t>(plan.command_count()));
}

// The devices' current attributes from the groups' answers; a device whose
// group did not answer, or which was never observed, is unknown.
routine::DeviceStates states_of(const std::vector<DeviceService::GroupRead>& groups, proto::PlanReply& reply) {
  routine::DeviceStates states;
  for (const auto& group : groups) {
    if (group.error) {
      reply.add_notes(fmt::format("group {} could not be read ({}): the states of its devices are taken as unknown",
                                  group.group, *group.error));
    }
    for (const auto& state : group.devices) {
      if (state.known()) states[state.device()] = routine::from_proto(state.attributes());
    }
  }
  return states;
}

}  // namespace

proto::AdminResponse AdminPreconditions::list() const {
  const routine::Catalog& catalog = node_.catalog();
  proto::AdminResponse response;
  proto::PreconditionsReply& out = *response.mutable_preconditions();
  out.set_catalog_version(catalog.version());
  for (const auto& [id, spec] : catalog.preconditions()) {
    proto::PreconditionRow& row = *out.add_rules();
    row.set_id(id);
    row.set_when(spec.when);
    for (const auto& text : spec.required) row.add_requirements(text);
    row.set_in_file(catalog.precondition_in_file(id));
    if (const auto problem = catalog.precondition_problems().find(id);
        problem != catalog.precondition_problems().end()) {
      row.set_problem(problem->second);
    }
  }
  return response;
}

void AdminPreconditions::plan(const proto::PlanRequest& request, Reply reply) {
  core::Expected<std::vector<PlanSubject>, std::string> subjects = core::Unexpected(std::string(
      "plan needs a subject: device set ID ATTR=VALUE or routine ID; is meshctl from a different version?"));
  if (request.has_device()) {
    subjects = device_subjects(node_.catalog(), request.device());
  } else if (request.subject_case() == proto::PlanRequest::kRoutine) {
    subjects = routine_subjects(node_.catalog(), request.routine());
  }
  if (!subjects) {
    reply(error_response(subjects.error()));
    return;
  }
  const uint32_t timeout_ms = request.timeout_ms() == 0 ? kDefaultStateReadMs : request.timeout_ms();
  node_.devices().read_devices(
      timeout_of(timeout_ms), [this, alive = alive_, subjects = std::move(*subjects),
                               reply = std::move(reply)](const std::vector<DeviceService::GroupRead>& groups) {
        if (!*alive) return;
        proto::AdminResponse response;
        proto::PlanReply& out = *response.mutable_plan();
        const routine::DeviceStates states = states_of(groups, out);
        // The catalog as it is now: it may have changed during the read.
        const routine::Catalog& catalog = node_.catalog();
        for (const auto& [id, problem] : catalog.precondition_problems()) {
          out.add_notes(fmt::format("precondition rule {} is left out: {}", id, problem));
        }
        for (const PlanSubject& subject : subjects) {
          proto::CommandPlanMsg& plan = *out.add_plans();
          plan.set_command(subject.command);
          plan.set_subject(subject.condition.text());
          const auto graph = routine::build_graph(subject.condition, catalog.precondition_rules());
          if (!graph) {
            plan.set_error(graph.error());
            continue;
          }
          fill_graph(*graph, plan);
          const auto combo = routine::deduce(*graph, routine::DeductionPolicy{}, states);
          if (!combo) {
            plan.set_error(combo.error());
            continue;
          }
          fill_combo(*graph, *combo, plan);
        }
        reply(std::move(response));
      });
}

}  // namespace mesh::agent
