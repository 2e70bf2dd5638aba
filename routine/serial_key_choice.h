#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::routine {

// How an EV invocation chooses its serial key (routine/routine_leaders.h,
// "Serial keys"; SafeHome §5 and Fig. 14), `[routines] ev_scheduler`:
//  - tl: timeline placement. The key at which the invocation can start
//    soonest while delaying nobody: on every one of its devices, every entry
//    below the key is expected to be done with the device before the
//    invocation's first use there (starting later if need be: the
//    invocation slides into a later gap, as SafeHome's TL does), and the
//    invocation expects to be done before the first use of every entry
//    above it. A key below an entry already placed is a pre-lease; after
//    every entry is always possible, and chosen unless a gap lets it start
//    sooner (between gaps, on a tie, the lower key).
//  - fcfs: always after every entry on its devices (arrival order).
//  - jit: just in time: only once every one of its devices has an empty
//    lineage (no routine placed or holding), then after everything.
enum class EvScheduler { tl, fcfs, jit };

std::string_view to_string(EvScheduler scheduler);
std::optional<EvScheduler> parse_ev_scheduler(std::string_view text);

// One entry of a device's lineage, as its group answered.
struct LineageSlot {
  std::string holder;
  int64_t serial_key_us = 0;
  int64_t expected_first_use_us = 0;
  int64_t expected_done_us = 0;
};

// What the invocation read of one of its devices.
struct LineageView {
  int64_t floor_key_us = 0;          // no key at or below it is taken
  std::vector<LineageSlot> entries;  // in key order; maybe only the first ones
  bool truncated = false;            // more entries follow those
};

// When the invocation expects to use a device, if it started now.
struct ExpectedUse {
  int64_t first_use_us = 0;
  int64_t done_us = 0;
};

struct SerialKeyChoice {
  int64_t key_us = 0;
  // It goes before an entry already placed on one of its devices (SafeHome's
  // pre-lease).
  bool before_placed = false;
};

// Chooses the key, or nothing yet (jit, while a device is in use: ask again
// later). `lowest_key_us` is where keys start (the trigger time: in arrival
// order when nothing else decides). Pure: the same inputs give the same key.
// Whatever it chooses, serializability does not depend on it (the device
// groups keep every device in key order); it only decides who waits.
std::optional<SerialKeyChoice> choose_serial_key(EvScheduler scheduler, bool pre_lease, int64_t lowest_key_us,
                                                 const std::map<std::string, LineageView>& lineages,
                                                 const std::map<std::string, ExpectedUse>& uses);

}  // namespace mesh::routine
