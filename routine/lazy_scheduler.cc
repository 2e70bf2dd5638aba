#include "routine/lazy_scheduler.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace mesh::routine {

namespace {

// An arrival or a device release; ordered by time, releases first.
struct Event {
  core::TimePoint at{};
  bool is_arrival = false;
  std::string device;  // releases
  size_t routine = 0;  // arrivals: index into the sorted routines

  bool operator<(const Event& other) const {
    return std::tie(at, is_arrival, device, routine) <
           std::tie(other.at, other.is_arrival, other.device, other.routine);
  }
};

}  // namespace

std::vector<ScheduledRoutine> schedule_lazy(LazyPolicy policy, const std::vector<RoutineArrival>& routines,
                                            LineageTable& table) {
  std::vector<const RoutineArrival*> by_arrival;
  for (const auto& routine : routines) {
    if (!routine.commands.empty()) by_arrival.push_back(&routine);
  }
  std::sort(by_arrival.begin(), by_arrival.end(), [](const RoutineArrival* a, const RoutineArrival* b) {
    return std::tie(a->arrival, a->id) < std::tie(b->arrival, b->id);
  });

  std::set<Event> events;
  for (size_t i = 0; i < by_arrival.size(); ++i) events.insert({by_arrival[i]->arrival, true, "", i});
  std::set<std::string> held;
  std::set<size_t> waiting;  // indexes into by_arrival, so longest-waiting first
  std::vector<ScheduledRoutine> run;

  auto can_start = [&](size_t i) {
    return std::none_of(by_arrival[i]->commands.begin(), by_arrival[i]->commands.end(),
                        [&](const PlannedCommand& command) { return held.contains(command.device); });
  };
  auto start = [&](size_t i, core::TimePoint at) {
    const RoutineArrival& routine = *by_arrival[i];
    ScheduledRoutine scheduled{routine.id, routine.arrival, {}};
    std::map<std::string, core::TimePoint> release;
    for (const auto& command : routine.commands) {
      scheduled.commands.push_back({command.device, at, at + command.duration});
      table.insert(command.device, {routine.id, at, at + command.duration, AccessStatus::scheduled});
      release[command.device] = at + command.duration;
      at += command.duration;
    }
    for (const auto& [device, when] : release) {
      held.insert(device);
      events.insert({when, false, device, 0});
    }
    run.push_back(std::move(scheduled));
  };

  while (!events.empty()) {
    // FCFS looks at everything that happened at this instant at once; JiT
    // gives each event its own start.
    const core::TimePoint at = events.begin()->at;
    bool released = false;
    do {
      Event event = *events.begin();
      events.erase(events.begin());
      if (event.is_arrival) {
        waiting.insert(event.routine);
      } else {
        held.erase(event.device);
        released = true;
      }
    } while (policy == LazyPolicy::fcfs && !events.empty() && events.begin()->at == at);
    if (policy == LazyPolicy::fcfs && !released && !held.empty()) continue;
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (!can_start(*it)) {
        ++it;
        continue;
      }
      start(*it, at);
      it = waiting.erase(it);
      if (policy == LazyPolicy::jit) break;
    }
  }
  std::sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return run;
}

}  // namespace mesh::routine
