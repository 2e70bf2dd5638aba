// APEX precondition rules (routine/precondition_rule.h), written by
// operators in rules files: any text is accepted or refused with an error,
// never a crash or an exception escaping. The bytes go to the condition
// parser (with and without devices) and to the rules-file parser. An
// accepted condition must hold some value; accepted rules are then run
// through PEG generation and command deduction from each rule's `when`,
// and every command deduced must satisfy its vertex. The bytes are also
// decoded as a catalog's rule message (routine/precondition_codec.h): what
// decodes re-encodes to the same rule and resolves against the devices or
// says why not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "routine/command_deduction.h"
#include "routine/precondition_codec.h"
#include "routine/precondition_graph.h"
#include "routine/precondition_rule.h"

namespace {

using namespace mesh::routine;

const DeviceCatalog& catalog() {
  static const DeviceCatalog devices = [] {
    DeviceCatalog out;
    auto add = [&](const char* id, DeviceKind kind) {
      DeviceSpec spec;
      spec.id = id;
      spec.kind = kind;
      spec.driver = std::string("emulated://") + id;
      out[spec.id] = spec;
    };
    add("garden_sprinkler", DeviceKind::switch_);
    add("outlet_1", DeviceKind::plug);
    add("outlet_2", DeviceKind::plug);
    add("lab_thermostat", DeviceKind::thermostat);
    add("hall_light", DeviceKind::bulb);
    add("lab_sensor", DeviceKind::sensor);
    add("front_lock", DeviceKind::lock);
    return out;
  }();
  return devices;
}

void check_condition(const mesh::core::Expected<AttributeCondition, ConditionError>& condition) {
  if (!condition) {
    if (condition.error().column == 0 || condition.error().message.empty()) std::abort();
    return;
  }
  if (is_empty(condition->domain) || condition->text().empty()) std::abort();
  for (const auto& member : condition->domain.members) {
    if (!contains(condition->domain, member)) std::abort();
  }
}

void check_rule_message(std::string_view bytes) {
  mesh::proto::PreconditionRuleMsg msg;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return;
  }
  const auto spec = from_proto(msg);
  if (!spec) {
    if (spec.error().empty()) std::abort();
    return;
  }
  const auto again = from_proto(to_proto(*spec));
  if (!again || !(*again == *spec)) std::abort();
  const auto rule = resolve_rule(*spec, catalog());
  if (!rule && rule.error().empty()) std::abort();
  if (rule && (rule->id != spec->id || rule->preconditions.size() != spec->required.size())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_rule_message(text);
  check_condition(parse_condition(text));
  check_condition(parse_condition(text, catalog()));
  const auto rules = parse_precondition_rules(text, "fuzz-rules.toml", catalog());
  if (!rules) {
    if (rules.error().empty()) std::abort();
    return 0;
  }
  const DeviceStates states = {{"outlet_1", {{"power", true}}}, {"lab_thermostat", {{"target", 21.0}}}};
  for (const auto& rule : *rules) {
    const auto graph = build_graph(rule.when, *rules);
    if (!graph) continue;
    // Acyclic (every vertex in a level) and within the size bound.
    size_t placed = 0;
    for (const auto& level : graph->levels()) placed += level.size();
    if (placed != graph->vertices.size() || graph->vertices.size() > rules->size() * kMaxRulePreconditions + 1) {
      std::abort();
    }
    for (auto choice : {IntervalChoice::closest_to_current, IntervalChoice::lowest, IntervalChoice::midpoint}) {
      const auto plan = deduce(*graph, DeductionPolicy{choice, 0.5}, states);
      if (!plan) continue;
      for (const auto& stage : plan->stages) {
        for (const auto& step : stage) {
          if (step.action != StepAction::check &&
              !contains(graph->vertices[step.vertex].condition.domain, step.value)) {
            std::abort();
          }
        }
      }
      (void)plan->describe();
    }
    (void)graph->describe();
  }
  return 0;
}
