#include "routine/precondition_codec.h"

#include <fmt/format.h>

namespace mesh::routine {
namespace {

// Why `text`, the condition at `key` of rule `id`, cannot be one, if it
// cannot. Only the syntax is checked: the devices are the catalog's business.
std::optional<std::string> rule_condition_problem(const std::string& id, std::string_view key,
                                                  const std::string& text) {
  if (text.empty()) return fmt::format("precondition {}.{}: empty condition", id, key);
  if (text.size() > kMaxConditionLength) {
    return fmt::format("precondition {}.{}: condition of {} bytes; at most {} are allowed", id, key, text.size(),
                       kMaxConditionLength);
  }
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) {
      return fmt::format("precondition {}.{}: byte 0x{:02x} is not printable ASCII", id, key, c & 0xff);
    }
  }
  if (auto parsed = parse_condition(text); !parsed) {
    return fmt::format("precondition {}.{}: {}", id, key, parsed.error().text());
  }
  return std::nullopt;
}

}  // namespace

proto::PreconditionRuleMsg to_proto(const PreconditionRuleSpec& spec) {
  proto::PreconditionRuleMsg msg;
  msg.set_id(spec.id);
  msg.set_when(spec.when);
  for (const auto& text : spec.required) msg.add_requirements(text);
  return msg;
}

core::Expected<PreconditionRuleSpec, std::string> from_proto(const proto::PreconditionRuleMsg& msg) {
  if (auto problem = check_precondition_rule_id(msg.id())) return core::Unexpected(std::move(*problem));
  PreconditionRuleSpec spec;
  spec.id = msg.id();
  if (auto problem = rule_condition_problem(spec.id, "when", msg.when())) return core::Unexpected(std::move(*problem));
  spec.when = msg.when();
  if (msg.requirements_size() == 0) {
    return core::Unexpected(fmt::format("precondition {}.requires: the list is empty", spec.id));
  }
  if (static_cast<size_t>(msg.requirements_size()) > kMaxRulePreconditions) {
    return core::Unexpected(fmt::format("precondition {}.requires: {} conditions; at most {} are allowed", spec.id,
                                        msg.requirements_size(), kMaxRulePreconditions));
  }
  for (int i = 0; i < msg.requirements_size(); ++i) {
    if (auto problem = rule_condition_problem(spec.id, fmt::format("requires[{}]", i + 1), msg.requirements(i))) {
      return core::Unexpected(std::move(*problem));
    }
    spec.required.push_back(msg.requirements(i));
  }
  return spec;
}

}  // namespace mesh::routine
