#include "routine/serial_key_choice.h"

#include <algorithm>
#include <set>

namespace mesh::routine {

std::string_view to_string(EvScheduler scheduler) {
  switch (scheduler) {
    case EvScheduler::tl:
      return "tl";
    case EvScheduler::fcfs:
      return "fcfs";
    case EvScheduler::jit:
      return "jit";
  }
  return "tl";
}

std::optional<EvScheduler> parse_ev_scheduler(std::string_view text) {
  for (const EvScheduler scheduler : {EvScheduler::tl, EvScheduler::fcfs, EvScheduler::jit}) {
    if (text == to_string(scheduler)) return scheduler;
  }
  return std::nullopt;
}

namespace {

// How much later than planned the routine must start for `key` to fit the
// device's lineage: every entry below `key` done before its first use there,
// and (starting that much later) done before the first use of every entry
// above `key`; nothing if it cannot fit.
std::optional<int64_t> delay_to_fit(const LineageView& view, const ExpectedUse& use, int64_t key) {
  if (key <= view.floor_key_us) return std::nullopt;
  // Entries not shown may sit above `key`: only a key below the last one
  // shown is judged.
  if (view.truncated && (view.entries.empty() || key >= view.entries.back().serial_key_us)) return std::nullopt;
  int64_t delay = 0;
  for (const LineageSlot& slot : view.entries) {
    if (slot.serial_key_us < key) delay = std::max(delay, slot.expected_done_us - use.first_use_us);
  }
  for (const LineageSlot& slot : view.entries) {
    if (slot.serial_key_us > key && use.done_us + delay > slot.expected_first_use_us) return std::nullopt;
  }
  return delay;
}

}  // namespace

std::optional<SerialKeyChoice> choose_serial_key(EvScheduler scheduler, bool pre_lease, int64_t lowest_key_us,
                                                 const std::map<std::string, LineageView>& lineages,
                                                 const std::map<std::string, ExpectedUse>& uses) {
  // After everything: above every floor and every entry shown, and at
  // least the trigger time.
  int64_t after_all = std::max<int64_t>(lowest_key_us, 1);
  int64_t above_floors = 1;
  bool empty = true;
  for (const auto& [device, view] : lineages) {
    above_floors = std::max(above_floors, view.floor_key_us + 1);
    after_all = std::max(after_all, view.floor_key_us + 1);
    for (const LineageSlot& slot : view.entries) after_all = std::max(after_all, slot.serial_key_us + 1);
    empty = empty && view.entries.empty();
  }
  if (scheduler == EvScheduler::jit && !empty) return std::nullopt;
  if (scheduler != EvScheduler::tl || !pre_lease) return SerialKeyChoice{after_all, false};
  // TL: the candidates are just below each placed entry (a gap before it);
  // the one where the routine can start soonest without delaying anyone
  // wins (the lower key on a tie), if sooner than appending, which always
  // fits, after the expected end of everything on its devices.
  std::set<int64_t> candidates;
  for (const auto& [device, view] : lineages) {
    for (const LineageSlot& slot : view.entries) {
      if (slot.serial_key_us - 1 >= above_floors) candidates.insert(slot.serial_key_us - 1);
    }
  }
  int64_t append_delay = 0;
  for (const auto& [device, view] : lineages) {
    const auto use = uses.find(device);
    if (use == uses.end()) continue;
    for (const LineageSlot& slot : view.entries) {
      append_delay = std::max(append_delay, slot.expected_done_us - use->second.first_use_us);
    }
  }
  SerialKeyChoice best{after_all, false};
  int64_t best_delay = append_delay;
  for (const int64_t key : candidates) {
    std::optional<int64_t> delay = 0;
    for (const auto& [device, view] : lineages) {
      const auto use = uses.find(device);
      if (use == uses.end()) continue;
      const auto here = delay_to_fit(view, use->second, key);
      delay = here ? std::optional(std::max(*delay, *here)) : std::nullopt;
      if (!delay) break;
    }
    // The delay must fit every device at once: check again with it.
    if (delay && *delay > 0) {
      for (const auto& [device, view] : lineages) {
        const auto use = uses.find(device);
        if (use == uses.end()) continue;
        const ExpectedUse later{use->second.first_use_us + *delay, use->second.done_us + *delay};
        const auto here = delay_to_fit(view, later, key);
        if (!here || *here != 0) {
          delay.reset();
          break;
        }
      }
    }
    if (delay && *delay < best_delay) {
      best = SerialKeyChoice{key, true};
      best_delay = *delay;
    }
  }
  return best;
}

}  // namespace mesh::routine
