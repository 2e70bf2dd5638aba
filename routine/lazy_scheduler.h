#pragma once

#include <vector>

#include "routine/lineage.h"
#include "routine/routine_schedule.h"

namespace mesh::routine {

// The two lazy baselines TL is compared with (safehome.md §5, §7.5, as the
// authors' simulator runs them): a routine starts only when all its devices
// are free, takes them all, runs its commands back to back and frees each
// device when its last command there ends.
enum class LazyPolicy {
  // Waiting routines are looked at only when a device is released (or when
  // one arrives to a home where no device is held): then each one that can
  // take all its devices starts, longest-waiting first. A routine whose
  // devices are free still waits for the next release, as in the authors'
  // simulator; the paper's FCFS never lets a routine overtake an earlier
  // one, which this relaxes the same way the simulator does.
  fcfs,
  // At every arrival and every release (the paper's two triggers of the
  // eligibility test) one routine starts: the longest-waiting one that can
  // take all its devices.
  jit,
};

// Runs `routines` (any order) to completion under `policy` and records every
// command's access in `table`. Events at the same instant go releases first
// (a device freed at t can be taken at t), then arrivals, each kind in
// device or arrival order; "longest-waiting" is the earliest arrival, then the
// smaller id. Returns the routines as run, in id order; routines without
// commands are left out. Serializable by construction: routines sharing a
// device never overlap there, and each one's order on every device is its
// start order.
std::vector<ScheduledRoutine> schedule_lazy(LazyPolicy policy, const std::vector<RoutineArrival>& routines,
                                            LineageTable& table);

}  // namespace mesh::routine
