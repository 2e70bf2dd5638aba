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

// Every entry below `key` done before the first use, and done before every
// entry above `key` first uses the device.
bool fits(const LineageView& view, const ExpectedUse& use, int64_t key) {
  if (key <= view.floor_key_us) return false;
  for (const LineageSlot& slot : view.entries) {
    if (slot.serial_key_us < key) {
      if (slot.expected_done_us > use.first_use_us) return false;
    } else if (use.done_us > slot.expected_first_use_us) {
      return false;
    }
  }
  // Entries not shown may sit above `key`: only a key below the last one
  // shown is judged.
  return !view.truncated || (!view.entries.empty() && key < view.entries.back().serial_key_us);
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
  // TL: the candidates are just below each placed entry (a gap before it),
  // lowest first; the first that fits every device wins.
  std::set<int64_t> candidates;
  for (const auto& [device, view] : lineages) {
    for (const LineageSlot& slot : view.entries) {
      if (slot.serial_key_us - 1 >= above_floors) candidates.insert(slot.serial_key_us - 1);
    }
  }
  for (const int64_t key : candidates) {
    const bool everywhere = std::all_of(lineages.begin(), lineages.end(), [&](const auto& entry) {
      const auto use = uses.find(entry.first);
      return use == uses.end() || fits(entry.second, use->second, key);
    });
    if (everywhere) return SerialKeyChoice{key, key < after_all};
  }
  return SerialKeyChoice{after_all, false};
}

}  // namespace mesh::routine
