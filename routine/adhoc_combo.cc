#include "routine/adhoc_combo.h"

#include <fmt/format.h>

#include "routine/device_codec.h"

namespace mesh::routine {

std::string adhoc_routine_id(std::string_view device) { return std::string(kAdhocRoutinePrefix) + std::string(device); }

bool is_adhoc_routine(std::string_view routine) { return routine.starts_with(kAdhocRoutinePrefix); }

RoutineSpec adhoc_spec(const std::string& device, Attributes values, LockStrategy lock) {
  RoutineSpec spec;
  spec.id = adhoc_routine_id(device);
  spec.trigger_text = "manual";
  spec.trigger.manual = true;
  spec.commands.push_back(RoutineCommand{device, std::move(values), std::nullopt, true, {}});
  spec.min_retrigger = core::Duration::zero();
  spec.lock_strategy = lock;
  return spec;
}

proto::AdhocCommandMsg to_adhoc_proto(const RoutineSpec& spec) {
  proto::AdhocCommandMsg msg;
  if (!spec.commands.empty()) {
    msg.set_device(spec.commands.front().device);
    to_proto(spec.commands.front().values, *msg.mutable_values());
  }
  if (spec.lock_strategy != LockStrategy::mesh_default) {
    msg.set_lock_strategy(std::string(to_string(spec.lock_strategy)));
  }
  return msg;
}

core::Expected<RoutineSpec, std::string> adhoc_from_proto(const proto::AdhocCommandMsg& msg) {
  if (auto problem = check_device_id(msg.device())) return core::Unexpected("ad hoc command: " + *problem);
  Attributes values = from_proto(msg.values());
  if (values.empty() || values.size() != static_cast<size_t>(msg.values_size())) {
    return core::Unexpected(
        fmt::format("ad hoc command on {}: a value is missing, unreadable or set twice", msg.device()));
  }
  LockStrategy lock = LockStrategy::mesh_default;
  if (!msg.lock_strategy().empty()) {
    const auto parsed = parse_lock_strategy(msg.lock_strategy());
    if (!parsed || *parsed == LockStrategy::mesh_default) {
      return core::Unexpected(fmt::format("ad hoc command on {}: unknown lock strategy '{}' (sla, ola or aggressive)",
                                          msg.device(), msg.lock_strategy()));
    }
    lock = *parsed;
  }
  return adhoc_spec(msg.device(), std::move(values), lock);
}

}  // namespace mesh::routine
