#include "routine/safehome_metrics.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

namespace mesh::routine {

namespace {

double ratio(core::Duration numerator, core::Duration denominator) {
  if (denominator <= core::Duration::zero()) return 1.0;
  return static_cast<double>(numerator.count()) / static_cast<double>(denominator.count());
}

core::TimePoint start_of(const ScheduledRoutine& routine) {
  return routine.commands.empty() ? routine.arrival : routine.commands.front().start;
}

core::TimePoint end_of(const ScheduledRoutine& routine) {
  return routine.commands.empty() ? routine.arrival : routine.commands.back().end;
}

// Committed routines writing contested devices, numbered 0..n-1 in a
// group, with each one's contested devices and whether its value there is
// the actual one.
struct GroupRoutine {
  std::vector<std::pair<size_t, bool>> writes;  // (device number, matches)
};

// Mismatches decided by putting `routine` in front of the routines in
// `later`: the devices it writes and none of them does.
template <typename WrittenByLater>
size_t decided_mismatches(const GroupRoutine& routine, WrittenByLater written_by_later) {
  size_t mismatches = 0;
  for (const auto& [device, matches] : routine.writes) {
    if (!matches && !written_by_later(device)) ++mismatches;
  }
  return mismatches;
}

size_t exact_group_cost(const std::vector<GroupRoutine>& group, const std::vector<uint32_t>& writers_of_device) {
  const size_t n = group.size();
  std::vector<size_t> cost(size_t{1} << n, std::numeric_limits<size_t>::max());
  cost[0] = 0;
  for (uint32_t set = 1; set < cost.size(); ++set) {
    for (size_t r = 0; r < n; ++r) {
      uint32_t bit = uint32_t{1} << r;
      if ((set & bit) == 0) continue;
      uint32_t later = set & ~bit;
      size_t total = cost[later] + decided_mismatches(group[r], [&](size_t device) {
                       return (writers_of_device[device] & later) != 0;
                     });
      cost[set] = std::min(cost[set], total);
    }
  }
  return cost.back();
}

size_t greedy_group_cost(const std::vector<GroupRoutine>& group, const std::vector<std::set<size_t>>& writers) {
  std::vector<bool> placed(group.size(), false);
  size_t total = 0;
  for (size_t step = 0; step < group.size(); ++step) {
    size_t best = group.size();
    size_t best_cost = std::numeric_limits<size_t>::max();
    for (size_t r = 0; r < group.size(); ++r) {
      if (placed[r]) continue;
      size_t cost = decided_mismatches(group[r], [&](size_t device) {
        return std::any_of(writers[device].begin(), writers[device].end(), [&](size_t w) { return placed[w]; });
      });
      if (cost < best_cost) {
        best = r;
        best_cost = cost;
      }
    }
    placed[best] = true;
    total += best_cost;
  }
  return total;
}

size_t find_root(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

core::Duration wait_time(const ScheduledRoutine& routine) { return start_of(routine) - routine.arrival; }

core::Duration end_to_end(const ScheduledRoutine& routine) { return end_of(routine) - routine.arrival; }

core::Duration back_to_back(const ScheduledRoutine& routine) {
  core::Duration total{};
  for (const auto& command : routine.commands) total += command.end - command.start;
  return total;
}

double latency_overhead(const ScheduledRoutine& routine) { return ratio(end_to_end(routine), back_to_back(routine)); }

double ev_stretch(const ScheduledRoutine& routine) {
  core::Duration gaps{};
  for (size_t i = 1; i < routine.commands.size(); ++i) {
    gaps += routine.commands[i].start - routine.commands[i - 1].end;
  }
  return ratio(gaps + back_to_back(routine), back_to_back(routine));
}

double temporary_incongruence(const ScheduledRoutine& routine, const std::vector<ScheduledRoutine>& schedule) {
  const core::TimePoint start = start_of(routine);
  const core::TimePoint end = end_of(routine);
  if (end <= start) return 0.0;
  for (const auto& command : routine.commands) {
    std::optional<core::TimePoint> first_attack;
    for (const auto& other : schedule) {
      if (other.id == routine.id) continue;
      for (const auto& attack : other.commands) {
        if (attack.device != command.device || attack.start < command.start || attack.start >= end) continue;
        if (!first_attack || attack.start < *first_attack) first_attack = attack.start;
      }
    }
    if (first_attack) return ratio(end - *first_attack, end - start);
  }
  return 0.0;
}

double parallelism_level(const std::vector<ScheduledRoutine>& schedule) {
  std::map<core::TimePoint, int> change;  // net routines starting at each time
  core::TimePoint last_end{};
  bool any = false;
  for (const auto& routine : schedule) {
    if (routine.commands.empty()) continue;
    ++change[start_of(routine)];
    --change[end_of(routine)];
    last_end = any ? std::max(last_end, end_of(routine)) : end_of(routine);
    any = true;
  }
  int running = 0;
  double sum = 0;
  size_t samples = 0;
  for (const auto& [at, delta] : change) {
    if (at >= last_end) break;
    running += delta;
    if (delta == 0) continue;
    sum += running;
    ++samples;
  }
  return samples == 0 ? 0.0 : sum / static_cast<double>(samples);
}

double order_mismatch(const std::vector<ScheduledRoutine>& schedule) {
  // device -> (first use, id) of each routine using it
  std::map<std::string, std::map<InvocationId, core::TimePoint>> first_use;
  for (const auto& routine : schedule) {
    for (const auto& command : routine.commands) {
      auto [it, added] = first_use[command.device].try_emplace(routine.id, command.start);
      if (!added) it->second = std::min(it->second, command.start);
    }
  }
  double sum = 0;
  size_t devices = 0;
  for (const auto& [device, uses] : first_use) {
    if (uses.size() < 2) continue;
    std::vector<std::pair<core::TimePoint, InvocationId>> order;
    for (const auto& [id, at] : uses) order.emplace_back(at, id);
    std::sort(order.begin(), order.end());
    size_t swaps = 0;  // inversions: what bubble sort swaps
    for (size_t i = 0; i < order.size(); ++i) {
      for (size_t j = i + 1; j < order.size(); ++j) {
        if (order[i].second > order[j].second) ++swaps;
      }
    }
    auto n = static_cast<double>(order.size());
    sum += static_cast<double>(swaps) / (n * (n - 1) / 2);
    ++devices;
  }
  return devices == 0 ? 0.0 : sum / static_cast<double>(devices);
}

FinalIncongruence final_incongruence(const FinalStateInput& input) {
  FinalIncongruence result;
  result.devices = input.actual_end.size();

  // Classify each device of the home by its committed writers' values.
  std::map<std::string, size_t> contested;  // device -> number
  for (const auto& [device, actual] : input.actual_end) {
    size_t writers = 0;
    size_t matching = 0;
    for (const auto& [id, writes] : input.committed_writes) {
      auto it = writes.find(device);
      if (it == writes.end()) continue;
      ++writers;
      if (it->second == actual) ++matching;
    }
    if (writers == 0) {
      auto initial = input.initial.find(device);
      if (initial != input.initial.end() && initial->second != actual) ++result.incongruent_devices;
    } else if (matching == 0) {
      ++result.incongruent_devices;
    } else if (matching < writers) {
      contested.emplace(device, contested.size());
    }
  }

  // The routines writing contested devices, grouped through shared ones.
  std::vector<GroupRoutine> routines;
  std::vector<std::set<size_t>> writers_of(contested.size());  // device -> routine numbers
  for (const auto& [id, writes] : input.committed_writes) {
    GroupRoutine routine;
    for (const auto& [device, value] : writes) {
      auto it = contested.find(device);
      if (it == contested.end()) continue;
      routine.writes.emplace_back(it->second, value == input.actual_end.at(device));
      writers_of[it->second].insert(routines.size());
    }
    if (!routine.writes.empty()) routines.push_back(std::move(routine));
  }
  std::vector<size_t> parent(routines.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  for (const auto& writers : writers_of) {
    for (size_t w : writers) parent[find_root(parent, w)] = find_root(parent, *writers.begin());
  }
  std::map<size_t, std::vector<size_t>> groups;  // root -> routine numbers
  for (size_t r = 0; r < routines.size(); ++r) groups[find_root(parent, r)].push_back(r);

  for (const auto& [root, members] : groups) {
    // Renumber the group's routines 0..n-1 and its devices' writers.
    std::map<size_t, size_t> local;
    for (size_t r : members) local.emplace(r, local.size());
    std::vector<GroupRoutine> group;
    std::vector<std::set<size_t>> writers(contested.size());
    for (size_t r : members) group.push_back(routines[r]);
    for (size_t d = 0; d < writers_of.size(); ++d) {
      for (size_t w : writers_of[d]) {
        if (local.contains(w)) writers[d].insert(local.at(w));
      }
    }
    if (group.size() <= kExactFinalIncongruenceRoutines) {
      std::vector<uint32_t> masks(contested.size(), 0);
      for (size_t d = 0; d < writers.size(); ++d) {
        for (size_t w : writers[d]) masks[d] |= uint32_t{1} << w;
      }
      result.incongruent_devices += exact_group_cost(group, masks);
    } else {
      size_t cost = greedy_group_cost(group, writers);
      if (cost > 0) result.exact = false;
      result.incongruent_devices += cost;
    }
  }
  return result;
}

AbortStats abort_stats(const std::vector<RoutineOutcome>& outcomes) {
  AbortStats stats;
  size_t aborted = 0;
  size_t rollbacks = 0;
  for (const auto& outcome : outcomes) {
    if (!outcome.aborted) continue;
    ++aborted;
    rollbacks += outcome.rollback_commands;
  }
  if (outcomes.empty()) return stats;
  stats.abort_rate = static_cast<double>(aborted) / static_cast<double>(outcomes.size());
  if (aborted > 0) stats.rollback_commands_per_abort = static_cast<double>(rollbacks) / static_cast<double>(aborted);
  return stats;
}

}  // namespace mesh::routine
