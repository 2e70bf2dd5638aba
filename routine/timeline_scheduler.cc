#include "routine/timeline_scheduler.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mesh::routine {

namespace {

struct Interval {
  core::TimePoint start{};
  core::TimePoint end{};
  bool overlaps(core::TimePoint from, core::TimePoint to) const { return start < to && from < end; }
};

// One depth-first search of Algorithm 1 over a snapshot of the table.
class TimelineSearch {
 public:
  TimelineSearch(const LineageTable& table, const TimelineOptions& options, const RoutineArrival& routine)
      : table_(table), options_(options), routine_(routine), graph_(table.precedence()), spans_(table.spans()) {}

  // The positions of all commands, or none if the search found nothing or
  // ran out of probes.
  std::optional<std::vector<PlacedCommand>> run() {
    if (!place_from(0, routine_.arrival, {}, {})) return std::nullopt;
    if (options_.just_in_time) move_first_command_late();
    return chosen_;
  }

  size_t probes() const { return probes_; }

  // The always-valid placement: after everything on the routine's devices.
  std::vector<PlacedCommand> appended() const {
    core::TimePoint start = routine_.arrival;
    for (const auto& command : routine_.commands) {
      const Lineage* lineage = table_.find(command.device);
      if (lineage == nullptr) continue;
      for (const auto& access : lineage->accesses()) {
        if (!access.live()) continue;
        start = std::max(start, access.end);
        if (!options_.post_lease) start = std::max(start, spans_.at(access.invocation).finish);
      }
    }
    std::vector<PlacedCommand> placed;
    for (const auto& command : routine_.commands) {
      placed.push_back({command.device, start, start + command.duration});
      start += command.duration;
    }
    return placed;
  }

 private:
  bool place_from(size_t index, core::TimePoint earliest, const std::set<uint64_t>& before,
                  const std::set<uint64_t>& after) {
    if (index == routine_.commands.size()) return post_holds_are_clear();
    const PlannedCommand& command = routine_.commands[index];
    const Lineage* lineage = table_.find(command.device);
    core::TimePoint from = earliest;
    while (probes_ < options_.max_probes) {
      ++probes_;
      if (index == 0) first_start_clearing_pre_hold_.reset();
      core::TimePoint start = first_fit(command.device, from, command.duration);
      core::TimePoint end = start + command.duration;
      if (!pre_hold_is_clear(index, command.device, start)) {
        note_pre_hold_conflict(command.device, start);
        return false;
      }
      const LockAccess* previous = lineage == nullptr ? nullptr : lineage->last_ending_by(start, routine_.id);
      const LockAccess* next = lineage == nullptr ? nullptr : lineage->first_starting_from(end, routine_.id);
      std::set<uint64_t> now_before = before;
      std::set<uint64_t> now_after = after;
      if (previous != nullptr) now_before.merge(graph_.ancestors(previous->invocation));
      if (next != nullptr) now_after.merge(graph_.descendants(next->invocation));
      if (disjoint(now_before, now_after)) {
        chosen_.push_back({command.device, start, end});
        if (place_from(index + 1, end, now_before, now_after)) return true;
        chosen_.pop_back();
      }
      // Later in this gap the neighbours are the same, and every later
      // command could only start later: the next candidate is the next gap.
      // But a later start of the whole routine shortens its pre-holds, so
      // the first command also tries, within this gap, the earliest start
      // that clears a conflict that stopped this try.
      if (index == 0 && first_start_clearing_pre_hold_ &&
          (next == nullptr || *first_start_clearing_pre_hold_ < next->end)) {
        from = *first_start_clearing_pre_hold_;
        continue;
      }
      if (next == nullptr) return false;
      from = next->end;
    }
    return false;
  }

  static bool disjoint(const std::set<uint64_t>& a, const std::set<uint64_t>& b) {
    auto i = a.begin();
    auto j = b.begin();
    while (i != a.end() && j != b.end()) {
      if (*i == *j) return false;
      if (*i < *j) {
        ++i;
      } else {
        ++j;
      }
    }
    return true;
  }

  // The earliest start at or after `from` where [start, start + duration)
  // is clear of other routines' accesses and of the holds a disabled lease
  // kind would lend.
  core::TimePoint first_fit(const std::string& device, core::TimePoint from, core::Duration duration) {
    const auto& blocked = forbidden(device);
    core::TimePoint start = from;
    bool moved = true;
    while (moved) {
      moved = false;
      for (const auto& interval : blocked) {
        if (interval.overlaps(start, start + duration)) {
          start = interval.end;
          moved = true;
        }
      }
    }
    return start;
  }

  // The latest start at most `latest` and at least `earliest` (which is
  // clear) whose access is clear.
  core::TimePoint last_fit(const std::string& device, core::TimePoint earliest, core::TimePoint latest,
                           core::Duration duration) {
    const auto& blocked = forbidden(device);
    core::TimePoint start = latest;
    bool moved = true;
    while (moved && start > earliest) {
      moved = false;
      for (const auto& interval : blocked) {
        if (interval.overlaps(start, start + duration)) {
          start = interval.start - duration;
          moved = true;
        }
      }
    }
    return std::max(start, earliest);
  }

  // Other routines' accesses on `device`, and the parts of their holds of it
  // that a disabled lease kind keeps to them.
  const std::vector<Interval>& forbidden(const std::string& device) {
    auto [it, added] = forbidden_.try_emplace(device);
    if (!added) return it->second;
    const Lineage* lineage = table_.find(device);
    if (lineage == nullptr) return it->second;
    std::map<InvocationId, Interval> uses;
    for (const auto& access : lineage->accesses()) {
      if (!access.live()) continue;
      it->second.push_back({access.start, access.end});
      auto [use, first] = uses.try_emplace(access.invocation, Interval{access.start, access.end});
      if (!first) use->second.end = std::max(use->second.end, access.end);
    }
    for (const auto& [invocation, use] : uses) {
      const auto& span = spans_.at(invocation);
      if (!options_.pre_lease && span.start < use.start) it->second.push_back({span.start, use.start});
      if (!options_.post_lease && use.end < span.finish) it->second.push_back({use.end, span.finish});
    }
    return it->second;
  }

  // Without pre-leasing no other routine may use `device` while the new
  // routine holds it before its first use there: between the routine's
  // start and `start`. Starting this command later only widens that, so a
  // failure here ends the search at this command; starting the routine
  // later narrows it (note_pre_hold_conflict).
  bool pre_hold_is_clear(size_t index, const std::string& device, core::TimePoint start) const {
    if (options_.pre_lease || index == 0) return true;
    for (size_t i = 0; i < index; ++i) {
      if (chosen_[i].device == device) return true;
    }
    return !used_by_others(device, chosen_.front().start, start);
  }

  // The earliest start of the routine that would clear the pre-hold of
  // `device` up to `start`: the end of the last other access in it. The
  // smallest such start over a try's conflicts is where the first command
  // tries next.
  void note_pre_hold_conflict(const std::string& device, core::TimePoint start) {
    const core::TimePoint routine_start = chosen_.front().start;
    core::TimePoint clear = routine_start;
    for (const auto& access : table_.find(device)->accesses()) {
      if (access.live() && access.start < start && routine_start < access.end) clear = std::max(clear, access.end);
    }
    if (!first_start_clearing_pre_hold_ || clear < *first_start_clearing_pre_hold_) {
      first_start_clearing_pre_hold_ = clear;
    }
  }

  // Without post-leasing no other routine may use a device after the new
  // routine's last use of it and before the routine finishes.
  bool post_holds_are_clear() const {
    if (options_.post_lease) return true;
    core::TimePoint finish = chosen_.back().end;
    std::map<std::string, core::TimePoint> last_use;
    for (const auto& placed : chosen_) last_use[placed.device] = std::max(last_use[placed.device], placed.end);
    for (const auto& [device, end] : last_use) {
      if (used_by_others(device, end, finish)) return false;
    }
    return true;
  }

  bool used_by_others(const std::string& device, core::TimePoint from, core::TimePoint to) const {
    const Lineage* lineage = table_.find(device);
    if (lineage == nullptr) return false;
    return std::any_of(lineage->accesses().begin(), lineage->accesses().end(), [&](const LockAccess& access) {
      return access.live() && access.start < to && from < access.end;
    });
  }

  // Just in time: the first command moves as late as the second command's
  // start and the next access on its device allow. It stays in its gap, so
  // the precedence is unchanged; the routine starts later, which only
  // shrinks its holds.
  void move_first_command_late() {
    if (chosen_.size() < 2) return;
    PlacedCommand& first = chosen_.front();
    core::Duration duration = first.end - first.start;
    core::TimePoint latest_end = chosen_[1].start;
    if (const Lineage* lineage = table_.find(first.device)) {
      if (const LockAccess* next = lineage->first_starting_from(first.end, routine_.id)) {
        latest_end = std::min(latest_end, next->start);
      }
    }
    first.start = last_fit(first.device, first.start, latest_end - duration, duration);
    first.end = first.start + duration;
  }

  const LineageTable& table_;
  const TimelineOptions& options_;
  const RoutineArrival& routine_;
  const PrecedenceGraph graph_;
  const std::map<InvocationId, LineageTable::Span> spans_;
  std::map<std::string, std::vector<Interval>> forbidden_;
  std::vector<PlacedCommand> chosen_;
  std::optional<core::TimePoint> first_start_clearing_pre_hold_;
  size_t probes_ = 0;
};

}  // namespace

TimelineScheduler::TimelineScheduler(LineageTable& table, TimelineOptions options) : table_(table), options_(options) {}

std::optional<TimelinePlacement> TimelineScheduler::place(const RoutineArrival& routine) {
  if (routine.commands.empty()) return std::nullopt;
  for (const auto& command : routine.commands) {
    if (command.duration <= core::Duration::zero()) return std::nullopt;
  }
  TimelineSearch search(table_, options_, routine);
  TimelinePlacement placement;
  placement.routine.id = routine.id;
  placement.routine.arrival = routine.arrival;
  if (auto found = search.run()) {
    placement.routine.commands = std::move(*found);
  } else {
    placement.routine.commands = search.appended();
    placement.appended = true;
  }
  placement.probes = search.probes();
  for (const auto& command : placement.routine.commands) {
    table_.insert(command.device, {routine.id, command.start, command.end, AccessStatus::scheduled});
  }
  return placement;
}

}  // namespace mesh::routine
