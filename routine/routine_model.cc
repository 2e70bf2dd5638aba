#include "routine/routine_model.h"

#include <fmt/format.h>

#include "routine/device_codec.h"
#include "routine/fault_points.h"

namespace mesh::routine {
namespace {

std::optional<std::string> check_resource_name(std::string_view name) {
  if (name.empty()) return "a resource name in uses must not be empty";
  if (name.size() > kMaxResourceNameLength) {
    return fmt::format("resource name '{}...' is longer than {} characters", name.substr(0, 16),
                       kMaxResourceNameLength);
  }
  for (char c : name) {
    if (c <= 0x20 || c >= 0x7f) {
      return fmt::format("resource name '{}' has '{}': use printable characters without spaces", name,
                         printable_char(c));
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_command_shape(const RoutineCommand& command) {
  if (auto problem = check_device_id(command.device)) return *problem;
  if (command.values.empty()) {
    return fmt::format("device {}: a command must set at least one attribute", command.device);
  }
  if (command.duration && (*command.duration <= core::Duration::zero() || *command.duration > kMaxCommandDuration)) {
    return fmt::format("device {}: a duration must be positive and at most {} h", command.device,
                       std::chrono::duration_cast<std::chrono::hours>(kMaxCommandDuration).count());
  }
  for (const auto& [name, value] : command.undo) {
    if (command.values.count(name) == 0) {
      return fmt::format(
          "device {}: undo sets '{}', which the command does not set; an undo replaces what a rollback "
          "restores of the command's own attributes: remove '{}' from undo or set it in the command too",
          command.device, name, name);
    }
  }
  return std::nullopt;
}

uint64_t to_ms(core::Duration duration) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
}

}  // namespace

std::string_view to_string(LockStrategy strategy) {
  switch (strategy) {
    case LockStrategy::mesh_default:
      return "default";
    case LockStrategy::sla:
      return "sla";
    case LockStrategy::ola:
      return "ola";
    case LockStrategy::aggressive:
      return "aggressive";
  }
  return "default";
}

std::optional<LockStrategy> parse_lock_strategy(std::string_view text) {
  if (text == "default") return LockStrategy::mesh_default;
  if (text == "sla") return LockStrategy::sla;
  if (text == "ola") return LockStrategy::ola;
  if (text == "aggressive") return LockStrategy::aggressive;
  return std::nullopt;
}

bool operator==(const RoutineSpec& a, const RoutineSpec& b) {
  return a.id == b.id && a.trigger == b.trigger && a.commands == b.commands && a.min_retrigger == b.min_retrigger &&
         a.enabled == b.enabled && a.uses == b.uses && a.lock_strategy == b.lock_strategy;
}

std::optional<std::string> check_routine_id(std::string_view id) {
  if (id.empty()) return "a routine id must not be empty";
  if (id.size() > kMaxRoutineIdLength) {
    return fmt::format("routine id '{}...' is longer than {} characters", id.substr(0, 16), kMaxRoutineIdLength);
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) {
      return fmt::format("routine id '{}' has '{}': use lower-case letters, digits, '_', '.' and '-'", id,
                         printable_char(c));
    }
  }
  return std::nullopt;
}

core::Expected<Trigger, std::string> build_trigger(std::string_view text, std::string_view window,
                                                   const std::vector<std::string>& days) {
  auto trigger = parse_trigger(text);
  if (!trigger) return core::Unexpected(trigger.error().text());
  if (!window.empty()) {
    auto parsed = parse_window(window);
    if (!parsed) return core::Unexpected(parsed.error());
    trigger->window = *parsed;
  }
  if (!days.empty()) {
    trigger->days.mask = 0;
    for (const std::string& entry : days) {
      auto parsed = parse_days(entry);
      if (!parsed) return core::Unexpected(fmt::format("days: {}", parsed.error()));
      trigger->days.mask = static_cast<uint8_t>(trigger->days.mask | parsed->mask);
    }
  }
  return std::move(*trigger);
}

std::optional<std::string> check_definition(const RoutineSpec& spec) {
  if (auto problem = check_routine_id(spec.id)) return *problem;
  const auto fail = [&](const std::string& problem) { return fmt::format("routine {}: {}", spec.id, problem); };
  auto parsed = parse_trigger(spec.trigger_text);
  if (!parsed) return fail(parsed.error().text());
  if (parsed->manual != spec.trigger.manual || !(parsed->condition == spec.trigger.condition)) {
    return fail("its trigger does not match its trigger text");
  }
  if (spec.trigger.manual && (spec.trigger.window || !spec.trigger.days.every())) {
    return fail("a manual routine runs only on demand: remove its window and days");
  }
  if (spec.trigger.days.mask == 0 || spec.trigger.days.mask > 0x7f) return fail("days name no day of the week");
  if (spec.trigger.window && (spec.trigger.window->start == spec.trigger.window->end ||
                              spec.trigger.window->start >= 24 * 60 || spec.trigger.window->end > 24 * 60)) {
    return fail("its window is not a part of the day");
  }
  if (spec.commands.empty()) return fail("it has no command; add at least one");
  if (spec.commands.size() > kMaxRoutineCommands) {
    return fail(fmt::format("it has {} commands; at most {} are allowed", spec.commands.size(), kMaxRoutineCommands));
  }
  for (size_t i = 0; i < spec.commands.size(); ++i) {
    if (auto problem = check_command_shape(spec.commands[i]))
      return fail(fmt::format("command {}: {}", i + 1, *problem));
  }
  if (spec.min_retrigger < core::Duration::zero() || spec.min_retrigger > kMaxMinRetrigger) {
    return fail(fmt::format("min_retrigger must be 0 to {} h",
                            std::chrono::duration_cast<std::chrono::hours>(kMaxMinRetrigger).count()));
  }
  if (spec.uses.size() > kMaxRoutineUses) {
    return fail(fmt::format("it uses {} resources; at most {} are allowed", spec.uses.size(), kMaxRoutineUses));
  }
  for (const std::string& resource : spec.uses) {
    if (auto problem = check_resource_name(resource)) return fail(*problem);
  }
  return std::nullopt;
}

std::optional<std::string> check(const RoutineSpec& spec, const DeviceCatalog& devices) {
  if (auto problem = check_definition(spec)) return problem;
  const auto fail = [&](const std::string& problem) { return fmt::format("routine {}: {}", spec.id, problem); };
  if (auto parsed = parse_trigger(spec.trigger_text, devices); !parsed) return fail(parsed.error().text());
  for (size_t i = 0; i < spec.commands.size(); ++i) {
    const RoutineCommand& command = spec.commands[i];
    const auto device = devices.find(command.device);
    if (device == devices.end()) {
      return fail(fmt::format("command {}: no device {} in the catalog", i + 1, command.device));
    }
    if (auto problem = check_command(device->second, command.values)) {
      return fail(fmt::format("command {}: {}", i + 1, *problem));
    }
    if (command.undo.empty()) continue;
    if (auto problem = check_command(device->second, command.undo)) {
      return fail(fmt::format("command {}: undo: {}; give undo a value the device takes", i + 1, *problem));
    }
  }
  return std::nullopt;
}

Attributes rollback_values(const RoutineCommand& command, const Attributes& state_before) {
  Attributes out;
  const bool use_undo = !fault_points().ignore_undo_values;
  for (const auto& [name, value] : command.values) {
    if (const auto undo = command.undo.find(name); use_undo && undo != command.undo.end()) {
      out.emplace(name, undo->second);
    } else if (const auto before = state_before.find(name); before != state_before.end()) {
      out.emplace(name, before->second);
    }
  }
  return out;
}

std::set<std::string> command_devices(const RoutineSpec& spec) {
  std::set<std::string> out;
  for (const auto& command : spec.commands) out.insert(command.device);
  return out;
}

bool names_device(const RoutineSpec& spec, const std::string& device) {
  return command_devices(spec).count(device) != 0 || devices(spec.trigger).count(device) != 0;
}

proto::RoutineSpecMsg to_proto(const RoutineSpec& spec) {
  proto::RoutineSpecMsg msg;
  msg.set_id(spec.id);
  msg.set_trigger(spec.trigger_text);
  if (spec.trigger.window) msg.set_window(format_window(*spec.trigger.window));
  if (!spec.trigger.days.every()) {
    for (const std::string& day : format_days(spec.trigger.days)) msg.add_days(day);
  }
  for (const auto& command : spec.commands) {
    proto::RoutineCommandMsg& out = *msg.add_commands();
    out.set_device(command.device);
    to_proto(command.values, *out.mutable_values());
    if (command.duration) out.set_duration_ms(to_ms(*command.duration));
    out.set_best_effort(!command.must);
    to_proto(command.undo, *out.mutable_undo());
  }
  msg.set_min_retrigger_ms(to_ms(spec.min_retrigger));
  msg.set_disabled(!spec.enabled);
  for (const std::string& resource : spec.uses) msg.add_uses(resource);
  if (spec.lock_strategy != LockStrategy::mesh_default)
    msg.set_lock_strategy(std::string(to_string(spec.lock_strategy)));
  return msg;
}

core::Expected<RoutineSpec, std::string> from_proto(const proto::RoutineSpecMsg& msg) {
  if (auto problem = check_routine_id(msg.id())) return core::Unexpected(*problem);
  const auto fail = [&](const std::string& problem) {
    return core::Unexpected(fmt::format("routine {}: {}", msg.id(), problem));
  };
  RoutineSpec spec;
  spec.id = msg.id();
  spec.trigger_text = msg.trigger();
  auto trigger = build_trigger(msg.trigger(), msg.window(), {msg.days().begin(), msg.days().end()});
  if (!trigger) return fail(trigger.error());
  spec.trigger = std::move(*trigger);
  const uint64_t max_duration_ms = to_ms(kMaxCommandDuration);
  for (int i = 0; i < msg.commands_size(); ++i) {
    const proto::RoutineCommandMsg& in = msg.commands(i);
    RoutineCommand command;
    command.device = in.device();
    command.values = from_proto(in.values());
    if (command.values.size() != static_cast<size_t>(in.values_size())) {
      return fail(fmt::format("command {}: a value is missing or set twice", i + 1));
    }
    if (in.duration_ms() > max_duration_ms) {
      return fail(fmt::format("command {}: a duration must be at most {} ms", i + 1, max_duration_ms));
    }
    if (in.duration_ms() != 0) command.duration = std::chrono::milliseconds(in.duration_ms());
    command.must = !in.best_effort();
    command.undo = from_proto(in.undo());
    if (command.undo.size() != static_cast<size_t>(in.undo_size())) {
      return fail(fmt::format("command {}: an undo value is missing or set twice", i + 1));
    }
    spec.commands.push_back(std::move(command));
  }
  if (msg.min_retrigger_ms() > to_ms(kMaxMinRetrigger)) {
    return fail(fmt::format("min_retrigger must be at most {} ms", to_ms(kMaxMinRetrigger)));
  }
  spec.min_retrigger = std::chrono::milliseconds(msg.min_retrigger_ms());
  spec.enabled = !msg.disabled();
  spec.uses.assign(msg.uses().begin(), msg.uses().end());
  if (!msg.lock_strategy().empty()) {
    const auto strategy = parse_lock_strategy(msg.lock_strategy());
    if (!strategy || *strategy == LockStrategy::mesh_default) {
      return fail(fmt::format("unknown lock strategy '{}' (sla, ola or aggressive)", msg.lock_strategy()));
    }
    spec.lock_strategy = *strategy;
  }
  if (auto problem = check_definition(spec)) return core::Unexpected(*problem);
  return spec;
}

}  // namespace mesh::routine
