#include "routine/serial_order_check.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "routine/precedence_graph.h"

namespace mesh::routine {

namespace {

std::string seconds(core::TimePoint at) { return fmt::format("{:g}s", core::to_seconds(at.time_since_epoch())); }

std::string quoted(const std::optional<std::string>& value) { return value ? "'" + *value + "'" : "(unknown)"; }

// A member of the serial order: a committed invocation, or one device event.
struct Item {
  ActuationKind kind = ActuationKind::command;  // command: an invocation
  InvocationId invocation = 0;
  const Actuation* event = nullptr;

  std::string name() const {
    if (kind == ActuationKind::command) return fmt::format("invocation {}", invocation);
    return fmt::format("{} of {} at {}", kind == ActuationKind::failure ? "failure" : "restart", event->device,
                       seconds(event->at));
  }
};

// What one edge of the precedence graph rests on.
struct EdgeReason {
  std::string device;
  core::TimePoint before{};
  core::TimePoint after{};
};

class SerialOrderCheck {
 public:
  SerialOrderCheck(const ExecutionRecord& record, SerialCheckOptions options) : record_(record), options_(options) {
    for (size_t i = 0; i < record.actuations.size(); ++i) per_device_[record.actuations[i].device].push_back(i);
    for (auto& [device, order] : per_device_) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return record.actuations[a].at < record.actuations[b].at; });
    }
    for (InvocationId invocation : record.committed) {
      item_of_invocation_[invocation] = items_.size();
      items_.push_back({ActuationKind::command, invocation, nullptr});
    }
    for (const auto& actuation : record.actuations) {
      if (actuation.kind == ActuationKind::failure || actuation.kind == ActuationKind::restart) {
        item_of_event_[&actuation] = items_.size();
        items_.push_back({actuation.kind, 0, &actuation});
      }
    }
  }

  std::optional<std::string> run() {
    check_outcomes();
    check_intended_writes();
    PrecedenceGraph graph = build_graph();
    if (auto cycle = graph.find_cycle()) {
      report_cycle(*cycle);
    } else {
      check_end_state(*graph.topological_order());
    }
    check_aborted_effects();
    if (problems_.empty()) return std::nullopt;
    return fmt::format("{}", fmt::join(problems_, "\n"));
  }

 private:
  bool is_invocation(const Actuation& actuation) const {
    return actuation.kind == ActuationKind::command || actuation.kind == ActuationKind::rollback;
  }

  // The serial-order item an actuation belongs to, if any (aborted and
  // unknown invocations have none).
  std::optional<size_t> item_of(const Actuation& actuation) const {
    if (!is_invocation(actuation)) return item_of_event_.at(&actuation);
    if (actuation.kind != ActuationKind::command) return std::nullopt;
    auto it = item_of_invocation_.find(actuation.invocation);
    if (it == item_of_invocation_.end()) return std::nullopt;
    return it->second;
  }

  std::string describe(const Actuation& actuation) const {
    if (!is_invocation(actuation)) return items_[item_of_event_.at(&actuation)].name();
    std::string outcome = record_.committed.contains(actuation.invocation) ? "committed"
                          : record_.aborted.contains(actuation.invocation) ? "aborted"
                                                                           : "unknown";
    return fmt::format("{} invocation {}'s {} at {}", outcome, actuation.invocation,
                       actuation.kind == ActuationKind::command ? "command" : "rollback", seconds(actuation.at));
  }

  void check_outcomes() {
    for (InvocationId invocation : record_.committed) {
      if (record_.aborted.contains(invocation)) {
        problems_.push_back(fmt::format("invocation {} is both committed and aborted", invocation));
      }
    }
    std::set<InvocationId> unknown;
    for (const auto& actuation : record_.actuations) {
      if (!is_invocation(actuation)) continue;
      bool committed = record_.committed.contains(actuation.invocation);
      if (!committed && !record_.aborted.contains(actuation.invocation) &&
          unknown.insert(actuation.invocation).second) {
        problems_.push_back(fmt::format("invocation {} actuated {} at {} but is neither committed nor aborted",
                                        actuation.invocation, actuation.device, seconds(actuation.at)));
      }
      if (committed && actuation.kind == ActuationKind::rollback) {
        problems_.push_back(fmt::format("committed invocation {} rolled back {} at {}", actuation.invocation,
                                        actuation.device, seconds(actuation.at)));
      }
    }
  }

  void check_intended_writes() {
    for (InvocationId invocation : record_.committed) {
      std::map<std::string, const Actuation*> last_write;
      for (const auto& [device, order] : per_device_) {
        for (size_t i : order) {
          const Actuation& actuation = record_.actuations[i];
          if (actuation.kind == ActuationKind::command && actuation.invocation == invocation) {
            last_write[device] = &actuation;
          }
        }
      }
      auto intended = record_.intended_writes.find(invocation);
      static const std::map<std::string, std::string> kNothing;
      const auto& writes = intended == record_.intended_writes.end() ? kNothing : intended->second;
      for (const auto& [device, value] : writes) {
        auto it = last_write.find(device);
        if (it == last_write.end()) {
          problems_.push_back(
              fmt::format("committed invocation {} never wrote {} (it intends '{}')", invocation, device, value));
        } else if (it->second->value != value) {
          problems_.push_back(fmt::format("committed invocation {} last wrote {}={} at {} but intends '{}'", invocation,
                                          device, quoted(it->second->value), seconds(it->second->at), value));
        }
      }
      for (const auto& [device, actuation] : last_write) {
        if (!writes.contains(device)) {
          problems_.push_back(fmt::format("committed invocation {} wrote {} at {}, which it does not intend to write",
                                          invocation, device, seconds(actuation->at)));
        }
      }
    }
  }

  PrecedenceGraph build_graph() {
    PrecedenceGraph graph;
    for (size_t i = 0; i < items_.size(); ++i) graph.add_node(i);
    for (const auto& [device, order] : per_device_) {
      std::optional<size_t> previous;
      core::TimePoint previous_at{};
      for (size_t i : order) {
        const Actuation& actuation = record_.actuations[i];
        std::optional<size_t> item = item_of(actuation);
        if (!item) continue;
        if (previous && *previous != *item) {
          graph.add_edge(*previous, *item);
          reasons_.try_emplace({*previous, *item}, EdgeReason{device, previous_at, actuation.at});
        }
        previous = item;
        previous_at = actuation.at;
      }
    }
    return graph;
  }

  void report_cycle(const std::vector<uint64_t>& cycle) {
    std::vector<std::string> steps;
    for (size_t i = 0; i < cycle.size(); ++i) {
      size_t from = cycle[i];
      size_t to = cycle[(i + 1) % cycle.size()];
      const EdgeReason& reason = reasons_.at({from, to});
      steps.push_back(fmt::format("{} before {} on {} ({} then {})", items_[from].name(), items_[to].name(),
                                  reason.device, seconds(reason.before), seconds(reason.after)));
    }
    problems_.push_back(fmt::format("no serial order: precedence cycle {}", fmt::join(steps, ", ")));
  }

  void check_aborted_effects() {
    for (const auto& [device, order] : per_device_) {
      // Each aborted invocation's last command on this device, as a position.
      std::map<InvocationId, size_t> last_command;
      for (size_t p = 0; p < order.size(); ++p) {
        const Actuation& actuation = record_.actuations[order[p]];
        if (actuation.kind == ActuationKind::command && record_.aborted.contains(actuation.invocation) &&
            !record_.committed.contains(actuation.invocation)) {
          last_command[actuation.invocation] = p;
        }
      }
      for (const auto& [invocation, position] : last_command) {
        bool rolled_back = false;
        bool overwritten = false;
        bool down_for_good = false;  // failed after the write and never restarted: nothing can undo it
        for (size_t p = position + 1; p < order.size(); ++p) {
          const Actuation& later = record_.actuations[order[p]];
          if (later.kind == ActuationKind::rollback && later.invocation == invocation) rolled_back = true;
          // By a committed invocation, an event, or another aborted
          // invocation's command or rollback (then the end state check
          // says whether what stands is right).
          if (later.value && (item_of(later) || later.invocation != invocation)) overwritten = true;
          if (later.kind == ActuationKind::failure) down_for_good = true;
          if (later.kind == ActuationKind::restart) down_for_good = false;
        }
        if (rolled_back || down_for_good || (overwritten && options_.overwrite_excuses_rollback)) continue;
        const Actuation& write = record_.actuations[order[position]];
        problems_.push_back(
            fmt::format("aborted invocation {} left its write {}={} at {} in place: no rollback{}", invocation, device,
                        quoted(write.value), seconds(write.at),
                        overwritten ? " (a later write is no excuse under this model)" : " and no later write"));
      }
    }
  }

  // Whether the device's log ends with a failure no restart followed.
  bool ends_down(const std::string& device) const {
    const auto it = per_device_.find(device);
    if (it == per_device_.end()) return false;
    bool down = false;
    for (size_t i : it->second) {
      const ActuationKind kind = record_.actuations[i].kind;
      if (kind == ActuationKind::failure) down = true;
      if (kind == ActuationKind::restart) down = false;
    }
    return down;
  }

  void check_end_state(const std::vector<uint64_t>& order) {
    std::map<std::string, std::string> serial = record_.initial_state;
    std::map<std::string, std::string> writer;
    for (uint64_t index : order) {
      const Item& item = items_[index];
      if (item.kind == ActuationKind::command) {
        auto intended = record_.intended_writes.find(item.invocation);
        if (intended == record_.intended_writes.end()) continue;
        for (const auto& [device, value] : intended->second) {
          serial[device] = value;
          writer[device] = item.name();
        }
      } else if (item.event->value) {
        serial[item.event->device] = *item.event->value;
        writer[item.event->device] = item.name();
      }
    }
    std::set<std::string> devices;
    for (const auto& [device, value] : serial) devices.insert(device);
    for (const auto& [device, unused] : per_device_) devices.insert(device);
    std::vector<std::string> names;
    names.reserve(order.size());
    for (uint64_t index : order) names.push_back(items_[index].name());
    for (const auto& device : devices) {
      if (ends_down(device)) continue;  // a dead device's state no longer shows
      std::optional<std::string> actual;
      std::string actual_by = "its initial state";
      if (auto initial = record_.initial_state.find(device); initial != record_.initial_state.end()) {
        actual = initial->second;
      }
      if (auto it = per_device_.find(device); it != per_device_.end()) {
        for (size_t i : it->second) {
          const Actuation& actuation = record_.actuations[i];
          if (!actuation.value) continue;
          actual = actuation.value;
          actual_by = describe(actuation);
        }
      }
      std::optional<std::string> expected;
      if (auto it = serial.find(device); it != serial.end()) expected = it->second;
      if (actual == expected) continue;
      auto by = writer.find(device);
      problems_.push_back(fmt::format("{} ends at {} (from {}) but the serial order [{}] leaves it at {} (from {})",
                                      device, quoted(actual), actual_by, fmt::join(names, ", "), quoted(expected),
                                      by == writer.end() ? "its initial state" : by->second));
    }
  }

  const ExecutionRecord& record_;
  SerialCheckOptions options_;
  std::map<std::string, std::vector<size_t>> per_device_;
  std::vector<Item> items_;
  std::map<InvocationId, size_t> item_of_invocation_;
  std::map<const Actuation*, size_t> item_of_event_;
  std::map<std::pair<size_t, size_t>, EdgeReason> reasons_;
  std::vector<std::string> problems_;
};

bool overlap(const ExecutionSpan& a, const ExecutionSpan& b) {
  return a.first_actuation < b.end && b.first_actuation < a.end;
}

template <typename Conflict>
std::optional<std::string> first_overlap(const std::vector<ExecutionSpan>& spans, Conflict conflict, const char* what) {
  std::vector<const ExecutionSpan*> sorted;
  sorted.reserve(spans.size());
  for (const auto& span : spans) sorted.push_back(&span);
  std::sort(sorted.begin(), sorted.end(), [](const ExecutionSpan* a, const ExecutionSpan* b) {
    return std::tie(a->first_actuation, a->invocation) < std::tie(b->first_actuation, b->invocation);
  });
  for (size_t i = 0; i < sorted.size(); ++i) {
    for (size_t j = i + 1; j < sorted.size(); ++j) {
      const ExecutionSpan& a = *sorted[i];
      const ExecutionSpan& b = *sorted[j];
      if (!overlap(a, b)) continue;
      auto shared = conflict(a, b);
      if (!shared) continue;
      return fmt::format("invocations {} [{}, {}) and {} [{}, {}) execute at once{}{}", a.invocation,
                         seconds(a.first_actuation), seconds(a.end), b.invocation, seconds(b.first_actuation),
                         seconds(b.end), what, *shared);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_serial_order(const ExecutionRecord& record, SerialCheckOptions options) {
  return SerialOrderCheck(record, options).run();
}

std::optional<std::string> check_global_strict(const std::vector<ExecutionSpan>& spans) {
  return first_overlap(
      spans, [](const ExecutionSpan&, const ExecutionSpan&) { return std::optional<std::string>(""); }, "");
}

std::optional<std::string> check_partitioned_strict(const std::vector<ExecutionSpan>& spans) {
  return first_overlap(
      spans,
      [](const ExecutionSpan& a, const ExecutionSpan& b) -> std::optional<std::string> {
        for (const auto& device : a.devices) {
          if (b.devices.contains(device)) return device;
        }
        return std::nullopt;
      },
      " sharing device ");
}

}  // namespace mesh::routine
