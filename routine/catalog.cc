#include "routine/catalog.h"

#include <algorithm>

#include <fmt/format.h>

#include "routine/device_codec.h"
#include "routine/precondition_codec.h"

namespace mesh::routine {
namespace {

struct Definitions {
  std::map<std::string, DeviceSpec> devices;
  std::map<std::string, RoutineSpec> routines;
  std::map<std::string, PreconditionRuleSpec> preconditions;
};

// Applies one accepted change. A spec that no longer decodes (a newer
// agent's) changes nothing, identically everywhere.
void apply(const proto::CatalogChange& change, Definitions& into) {
  switch (change.op_case()) {
    case proto::CatalogChange::kPut:
      if (auto spec = from_proto(change.put())) into.devices[spec->id] = std::move(*spec);
      break;
    case proto::CatalogChange::kRemove:
      into.devices.erase(change.remove());
      break;
    case proto::CatalogChange::kPutRoutine:
      if (auto spec = from_proto(change.put_routine())) into.routines[spec->id] = std::move(*spec);
      break;
    case proto::CatalogChange::kRemoveRoutine:
      into.routines.erase(change.remove_routine());
      break;
    case proto::CatalogChange::kSetRoutineEnabled:
      if (const auto it = into.routines.find(change.set_routine_enabled().id()); it != into.routines.end()) {
        it->second.enabled = change.set_routine_enabled().enabled();
      }
      break;
    case proto::CatalogChange::kPutPrecondition:
      if (auto spec = from_proto(change.put_precondition())) into.preconditions[spec->id] = std::move(*spec);
      break;
    case proto::CatalogChange::kRemovePrecondition:
      into.preconditions.erase(change.remove_precondition());
      break;
    case proto::CatalogChange::OP_NOT_SET:
      break;
  }
}

// The run-time layer alone: the accepted changes among `entries`.
Definitions replay(const std::vector<proto::CatalogEntry>& entries) {
  Definitions out;
  for (const auto& entry : entries) {
    if (!entry.refused()) apply(entry.change(), out);
  }
  return out;
}

std::optional<std::string> conflict(const DeviceSpec& existing, const DeviceSpec& proposed, bool replace,
                                    std::string_view where) {
  if (existing == proposed || replace) return std::nullopt;
  return fmt::format(
      "device {} is already defined differently ({}: kind {}, driver {}); use 'meshctl device add --replace' to "
      "change it, or remove it first",
      proposed.id, where, to_string(existing.kind), existing.driver);
}

std::optional<std::string> conflict(const RoutineSpec& existing, const RoutineSpec& proposed, bool replace,
                                    std::string_view where) {
  if (existing == proposed || replace) return std::nullopt;
  return fmt::format(
      "routine {} is already defined differently ({}: trigger {}{}); use 'meshctl routine add --replace' to "
      "change it, or remove it first",
      proposed.id, where, format_condition(existing.trigger), existing.enabled ? "" : ", disabled");
}

std::optional<std::string> conflict(const PreconditionRuleSpec& existing, const PreconditionRuleSpec& proposed,
                                    bool replace, std::string_view where) {
  if (existing == proposed || replace) return std::nullopt;
  return fmt::format(
      "precondition rule {} is already defined differently ({}: when {}); use 'meshctl precondition add --replace' "
      "to change it, or remove it first",
      proposed.id, where, existing.when);
}

// Whether a condition of `rule` is on an attribute of `device`. The texts
// were checked when the rule was decoded, so each parses.
bool rule_names_device(const PreconditionRuleSpec& rule, const std::string& device) {
  auto on_device = [&](const std::string& text) {
    const auto condition = parse_condition(text);
    return condition && condition->variable.device == device;
  };
  return on_device(rule.when) || std::any_of(rule.required.begin(), rule.required.end(), on_device);
}

// The first rule of `rules` that names `device`.
const PreconditionRuleSpec* rule_user_of(const std::map<std::string, PreconditionRuleSpec>& rules,
                                         const std::string& device) {
  for (const auto& [id, spec] : rules) {
    if (rule_names_device(spec, device)) return &spec;
  }
  return nullptr;
}

std::string in_use_by_rule(const std::string& device, const PreconditionRuleSpec& rule) {
  return fmt::format(
      "device {} is named by precondition rule {}; change or remove the rule first (meshctl precondition remove {})",
      device, rule.id, rule.id);
}

// The first routine of `routines` that names `device`.
const RoutineSpec* user_of(const std::map<std::string, RoutineSpec>& routines, const std::string& device) {
  for (const auto& [id, spec] : routines) {
    if (names_device(spec, device)) return &spec;
  }
  return nullptr;
}

std::string in_use(const std::string& device, const RoutineSpec& routine) {
  return fmt::format("device {} is used by routine {}; change or remove the routine first (meshctl routine remove {})",
                     device, routine.id, routine.id);
}

// Why removing `device` must be refused, given the routines and rules that
// would still name it.
std::optional<std::string> removal_problem(const Definitions& definitions, const std::string& device) {
  if (const RoutineSpec* user = user_of(definitions.routines, device)) return in_use(device, *user);
  if (const PreconditionRuleSpec* rule = rule_user_of(definitions.preconditions, device)) {
    return in_use_by_rule(device, *rule);
  }
  return std::nullopt;
}

}  // namespace

void Catalog::set_base(std::vector<DeviceSpec> devices, std::string file_digest, std::vector<RoutineSpec> routines,
                       std::vector<PreconditionRuleSpec> preconditions) {
  base_.clear();
  for (auto& spec : devices) base_[spec.id] = std::move(spec);
  base_routines_.clear();
  for (auto& spec : routines) base_routines_[spec.id] = std::move(spec);
  base_preconditions_.clear();
  for (auto& spec : preconditions) base_preconditions_[spec.id] = std::move(spec);
  file_digest_ = std::move(file_digest);
  rebuild();
}

bool Catalog::append(const proto::CatalogEntry& entry) {
  if (entry.version() != version() + 1) return false;
  entries_.push_back(entry);
  rebuild();
  return true;
}

bool Catalog::reset(const std::vector<proto::CatalogEntry>& entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].version() != i + 1) return false;
  }
  entries_ = entries;
  rebuild();
  return true;
}

const DeviceSpec* Catalog::find(const std::string& id) const {
  const auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : &it->second;
}

std::map<std::string, DeviceSpec> Catalog::devices_at(uint64_t version) const {
  Definitions effective{base_, base_routines_, base_preconditions_};
  for (size_t i = 0; i < version && i < entries_.size(); ++i) {
    if (!entries_[i].refused()) apply(entries_[i].change(), effective);
  }
  return std::move(effective.devices);
}

const RoutineSpec* Catalog::find_routine(const std::string& id) const {
  const auto it = routines_.find(id);
  return it == routines_.end() ? nullptr : &it->second;
}

const PreconditionRuleSpec* Catalog::find_precondition(const std::string& id) const {
  const auto it = preconditions_.find(id);
  return it == preconditions_.end() ? nullptr : &it->second;
}

void Catalog::rebuild() {
  Definitions effective{base_, base_routines_, base_preconditions_};
  for (const auto& entry : entries_) {
    if (!entry.refused()) apply(entry.change(), effective);
  }
  std::map<std::string, std::string> problems;
  for (const auto& [id, spec] : effective.routines) {
    if (auto problem = check(spec, effective.devices)) problems[id] = std::move(*problem);
  }
  std::vector<PreconditionRule> rules;
  std::map<std::string, std::string> rule_problems;
  for (const auto& [id, spec] : effective.preconditions) {
    auto rule = resolve_rule(spec, effective.devices);
    if (rule) {
      rules.push_back(std::move(*rule));
    } else {
      rule_problems[id] = rule.error();
    }
  }
  const bool changed = effective.devices != devices_ || effective.routines != routines_ ||
                       problems != routine_problems_ || effective.preconditions != preconditions_ ||
                       rule_problems != precondition_problems_;
  devices_ = std::move(effective.devices);
  routines_ = std::move(effective.routines);
  routine_problems_ = std::move(problems);
  preconditions_ = std::move(effective.preconditions);
  precondition_rules_ = std::move(rules);
  precondition_problems_ = std::move(rule_problems);
  if (changed && on_change_) on_change_();
}

std::optional<std::string> refusal(const std::vector<proto::CatalogEntry>& earlier,
                                   const proto::CatalogChange& change) {
  switch (change.op_case()) {
    case proto::CatalogChange::kPut: {
      auto spec = from_proto(change.put());
      if (!spec) return spec.error();
      const Definitions runtime = replay(earlier);
      if (const auto it = runtime.devices.find(spec->id); it != runtime.devices.end()) {
        return conflict(it->second, *spec, change.replace(), "by an earlier run-time change");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemove: {
      if (auto problem = check_device_id(change.remove())) return *problem;
      return removal_problem(replay(earlier), change.remove());
    }
    case proto::CatalogChange::kPutRoutine: {
      auto spec = from_proto(change.put_routine());
      if (!spec) return spec.error();
      const Definitions runtime = replay(earlier);
      if (const auto it = runtime.routines.find(spec->id); it != runtime.routines.end()) {
        return conflict(it->second, *spec, change.replace(), "by an earlier run-time change");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemoveRoutine:
      return check_routine_id(change.remove_routine());
    case proto::CatalogChange::kSetRoutineEnabled:
      return check_routine_id(change.set_routine_enabled().id());
    case proto::CatalogChange::kPutPrecondition: {
      auto spec = from_proto(change.put_precondition());
      if (!spec) return spec.error();
      const Definitions runtime = replay(earlier);
      if (const auto it = runtime.preconditions.find(spec->id); it != runtime.preconditions.end()) {
        return conflict(it->second, *spec, change.replace(), "by an earlier run-time change");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemovePrecondition:
      return check_precondition_rule_id(change.remove_precondition());
    case proto::CatalogChange::OP_NOT_SET:
      break;
  }
  return "an empty catalog change";
}

std::optional<std::string> check_change(const Catalog& catalog, const proto::CatalogChange& change) {
  if (auto problem = refusal(catalog.entries(), change)) return problem;
  switch (change.op_case()) {
    case proto::CatalogChange::kPut: {
      const auto spec = from_proto(change.put());
      const DeviceSpec* existing = catalog.find(spec->id);
      if (existing == nullptr) return std::nullopt;
      if (auto problem = conflict(*existing, *spec, change.replace(),
                                  catalog.in_file(spec->id) ? "in the catalog file" : "at run time")) {
        return problem;
      }
      DeviceCatalog devices = catalog.devices();
      devices[spec->id] = *spec;
      for (const auto& [id, routine] : catalog.routines()) {
        if (!names_device(routine, spec->id) || catalog.routine_problems().count(id) != 0) continue;
        if (auto problem = check(routine, devices)) {
          return fmt::format("changing device {} would break routine {} ({}); change the routine first", spec->id, id,
                             *problem);
        }
      }
      for (const auto& [id, rule] : catalog.preconditions()) {
        if (!rule_names_device(rule, spec->id) || catalog.precondition_problems().count(id) != 0) continue;
        if (auto resolved = resolve_rule(rule, devices); !resolved) {
          return fmt::format("changing device {} would break precondition rule {} ({}); change the rule first",
                             spec->id, id, resolved.error());
        }
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemove:
      if (catalog.find(change.remove()) == nullptr) return fmt::format("no device {} in the catalog", change.remove());
      return removal_problem(Definitions{{}, catalog.routines(), catalog.preconditions()}, change.remove());
    case proto::CatalogChange::kPutRoutine: {
      const auto spec = from_proto(change.put_routine());
      if (auto problem = check(*spec, catalog.devices())) return problem;
      if (const size_t size = change.put_routine().ByteSizeLong(); size > kMaxRoutineSpecBytes) {
        return fmt::format(
            "routine {} takes {} bytes encoded; a run-time routine must fit in {}: shorten its trigger or split it "
            "into several routines",
            spec->id, size, kMaxRoutineSpecBytes);
      }
      if (const RoutineSpec* existing = catalog.find_routine(spec->id)) {
        return conflict(*existing, *spec, change.replace(),
                        catalog.routine_in_file(spec->id) ? "in the catalog file" : "at run time");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemoveRoutine:
      if (catalog.find_routine(change.remove_routine()) == nullptr) {
        return fmt::format("no routine {} in the catalog", change.remove_routine());
      }
      return std::nullopt;
    case proto::CatalogChange::kSetRoutineEnabled:
      if (catalog.find_routine(change.set_routine_enabled().id()) == nullptr) {
        return fmt::format("no routine {} in the catalog", change.set_routine_enabled().id());
      }
      return std::nullopt;
    case proto::CatalogChange::kPutPrecondition: {
      const auto spec = from_proto(change.put_precondition());
      if (auto resolved = resolve_rule(*spec, catalog.devices()); !resolved) return resolved.error();
      if (const size_t size = change.put_precondition().ByteSizeLong(); size > kMaxPreconditionRuleBytes) {
        return fmt::format(
            "precondition rule {} takes {} bytes encoded; a run-time rule must fit in {}: split its requires over "
            "several rules with the same when",
            spec->id, size, kMaxPreconditionRuleBytes);
      }
      if (const PreconditionRuleSpec* existing = catalog.find_precondition(spec->id)) {
        return conflict(*existing, *spec, change.replace(),
                        catalog.precondition_in_file(spec->id) ? "in the catalog file" : "at run time");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemovePrecondition:
      if (catalog.find_precondition(change.remove_precondition()) == nullptr) {
        return fmt::format("no precondition rule {} in the catalog", change.remove_precondition());
      }
      return std::nullopt;
    case proto::CatalogChange::OP_NOT_SET:
      break;
  }
  return "an empty catalog change";
}

std::string describe(const proto::CatalogChange& change) {
  switch (change.op_case()) {
    case proto::CatalogChange::kPut:
      return fmt::format("put device {}", change.put().id());
    case proto::CatalogChange::kRemove:
      return fmt::format("remove device {}", change.remove());
    case proto::CatalogChange::kPutRoutine:
      return fmt::format("put routine {}", change.put_routine().id());
    case proto::CatalogChange::kRemoveRoutine:
      return fmt::format("remove routine {}", change.remove_routine());
    case proto::CatalogChange::kSetRoutineEnabled:
      return fmt::format("{} routine {}", change.set_routine_enabled().enabled() ? "enable" : "disable",
                         change.set_routine_enabled().id());
    case proto::CatalogChange::kPutPrecondition:
      return fmt::format("put precondition {}", change.put_precondition().id());
    case proto::CatalogChange::kRemovePrecondition:
      return fmt::format("remove precondition {}", change.remove_precondition());
    case proto::CatalogChange::OP_NOT_SET:
      break;
  }
  return "empty change";
}

}  // namespace mesh::routine
