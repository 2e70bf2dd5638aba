#pragma once

#include <cstddef>
#include <optional>

#include "routine/lineage.h"
#include "routine/routine_schedule.h"

namespace mesh::routine {

struct TimelineOptions {
  // Lock leasing (safehome.md §4.1). A pre-lease lets a routine use a device
  // inside another routine's hold before that routine's first use of it (the
  // borrower is serialized before the lender); a post-lease, after the
  // other's last use of it but before the other finishes (serialized after).
  // Turning both off makes routines that share a device hold it one after
  // the other, so none sees another's command mid-run.
  bool pre_lease = true;
  bool post_lease = true;
  // Move the first command as late as its gap and the second command allow
  // (the authors' simulator does this): the routine then takes its locks
  // just in time and holds them for less. A one-command routine keeps its
  // first fit.
  bool just_in_time = true;
  // At most this many candidate positions are tried per routine; see
  // TimelineScheduler.
  size_t max_probes = 4096;
};

// Where the scheduler put a routine.
struct TimelinePlacement {
  ScheduledRoutine routine;
  // The search found nothing within max_probes, or nothing at all, and the
  // routine went after everything on its devices.
  bool appended = false;
  size_t probes = 0;
};

// Timeline scheduling, TL (safehome.md §5, Algorithm 1): a new routine's
// commands are placed, in order and each after the previous one ends, into
// the gaps of their devices' lineages, depth first and first fit, going back
// to the previous command's next gap when a command finds none. A position
// is a gap of the device's lineage at or after the earliest start, clear of
// other routines' accesses and, with a lease kind off, of the parts of other
// routines' holds that kind would lend (and no other routine's access may
// fall into the same parts of the new routine's own hold). Without
// pre-leasing, when another routine's access falls into the new routine's
// hold before a later command, the first command also tries starting once
// that access has ended, which shortens the hold (rather than only its next
// gap: in its device's last gap there is none).
//
// Serializability. Each placement puts the routine after the access right
// before it and before the access right after it, on each of its devices.
// It is accepted only if no routine is both before it (transitively, over
// the precedence graph of the whole table) and after it (transitively):
// then the new edges close no cycle, because a new cycle would have to
// leave the routine to a successor and come back through a predecessor,
// making that path's nodes both. The authors' Algorithm 1 and simulator
// compare only the routines directly next to the new one on its own
// devices, which misses a cycle through a third routine on other devices
// (R1 before R2 on d1, R2 before R3 on d2, R3 before R1 on d3). The table's
// precedence graph stays acyclic, so a topological order of it is a serial
// order whose per-device order is every lineage's order: the lineages'
// execution has the end state of that serial order (EV, §2.1).
//
// Bound. The search tries at most options.max_probes positions (the number
// of gap combinations grows exponentially with the commands). When it runs
// out, or finds nothing, the routine is appended: it starts once every
// access on its devices has ended (and, without post-leasing, every routine
// holding them has finished) and runs its commands back to back. That is
// always valid: on each of its devices it comes after every other access,
// so it has predecessors and no successors and cannot be on a cycle; no
// other access falls inside its hold, and it falls inside no other
// routine's hold, so it needs no lease.
//
// Sans-IO: time is whatever the caller says (virtual in the simulator).
class TimelineScheduler {
 public:
  explicit TimelineScheduler(LineageTable& table, TimelineOptions options = {});

  // Places `routine` at or after its arrival and adds its accesses to the
  // table. None (and nothing changes) when it has no commands or a command
  // whose duration is not positive.
  std::optional<TimelinePlacement> place(const RoutineArrival& routine);

 private:
  LineageTable& table_;
  TimelineOptions options_;
};

}  // namespace mesh::routine
