#include "routine/routine_schedule.h"

namespace mesh::routine {

std::vector<PlannedCommand> plan_commands(const RoutineSpec& spec, core::Duration short_command) {
  std::vector<PlannedCommand> planned;
  planned.reserve(spec.commands.size());
  for (const auto& command : spec.commands) {
    planned.push_back({command.device, command.duration.value_or(short_command)});
  }
  return planned;
}

}  // namespace mesh::routine
