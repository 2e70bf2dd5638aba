#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/time.h"
#include "routine/routine_schedule.h"

namespace mesh::routine {

// SafeHome's metrics over a finished schedule (safehome.md §7.1, with the
// exact definitions of the authors' simulator, notes/safehome-code.md). A
// routine's start is its first command's start, its end its last command's
// end; commands are in routine order. A routine without commands waits and
// runs for zero, and has overhead and stretch 1 (nothing was stretched).

// First command start - arrival.
core::Duration wait_time(const ScheduledRoutine& routine);
// Last command end - arrival.
core::Duration end_to_end(const ScheduledRoutine& routine);
// The sum of command durations: the routine's run alone, no waits.
core::Duration back_to_back(const ScheduledRoutine& routine);
// end_to_end / back_to_back.
double latency_overhead(const ScheduledRoutine& routine);
// (sum of the gaps between consecutive commands + back_to_back) /
// back_to_back: how much the schedule stretched the run itself (§7.5.1).
double ev_stretch(const ScheduledRoutine& routine);

// Temporary incongruence of `routine` against the rest of `schedule`: an
// attack on its command c (device d) is another routine's command on d
// starting in [c.start, routine end). At the first attacked command, with
// t* the earliest attacker's start, the value is (end - t*) / (end - start):
// the share of the run during which the user could see another routine's
// effect on something this one set. 0 when never attacked.
double temporary_incongruence(const ScheduledRoutine& routine, const std::vector<ScheduledRoutine>& schedule);

// Parallelism level (§7.1): the number of routines running, sampled only
// where it changes (a routine runs in [start, end); at each start or end
// time before the last end the count just after it, kept when it differs
// from the count just before), averaged. 0 for an empty schedule.
double parallelism_level(const std::vector<ScheduledRoutine>& schedule);

// Order mismatch (§7.6): per device, the routines in the order they use it
// (each once, at its first use), and the number of adjacent swaps that sort
// them by id (the arrival order) divided by n(n-1)/2; averaged over devices
// used by at least two routines, 0 if there are none.
double order_mismatch(const std::vector<ScheduledRoutine>& schedule);

// The inputs of final incongruence. Values are opaque device states.
struct FinalStateInput {
  std::map<std::string, std::string> initial;
  std::map<std::string, std::string> actual_end;  // every device of the home
  // What each committed routine leaves on each device it writes.
  std::map<InvocationId, std::map<std::string, std::string>> committed_writes;
};

struct FinalIncongruence {
  size_t incongruent_devices = 0;
  size_t devices = 0;  // actual_end's
  // False only when a large group of interacting routines made the search
  // greedy and it left some devices incongruent: then incongruent_devices
  // is an upper bound (see final_incongruence).
  bool exact = true;
  double fraction() const {
    return devices == 0 ? 0.0 : static_cast<double>(incongruent_devices) / static_cast<double>(devices);
  }
};

// Routines in a group of at most this many are searched exhaustively.
inline constexpr size_t kExactFinalIncongruenceRoutines = 16;

// Final incongruence (§7.1): the fewest devices whose actual end state
// differs from the end state of a serial order of the committed routines.
//
// A serial order leaves each device at its last writer's value (at its
// initial state if no committed routine writes it; a device with no writer
// and no initial state counts as congruent). So:
//  - a device whose writers all wrote its actual value is congruent in every
//    order, and one whose actual value none of them wrote (or, unwritten,
//    that differs from its initial state) in none;
//  - the rest are contested, and only routines writing a contested device
//    matter; routines linked through shared contested devices form groups
//    whose orders are independent of each other.
// Within a group, build the order from its end: the routine put in front
// of a set S of later routines becomes the last writer of exactly the
// devices it writes that S does not, so the cost of a set is the cost of a
// smaller set plus what the front routine decides, and a dynamic program
// over subsets is exact (2^n n steps, used up to
// kExactFinalIncongruenceRoutines). Larger groups are built greedily, each
// time putting in front the routine that decides the fewest mismatches.
// This is still exact whenever the answer is 0, which is the case a correct
// EV run must reach: if an order O with no mismatch exists, the last
// routine of O among those not yet placed decides only matches, so the
// greedy choice costs 0; and after any 0-cost choice r, O without r,
// then r, then the placed ones, still has no mismatch (r decides the same
// devices as before, every other device keeps its last writer in O). Above
// 0 the greedy result is an upper bound and `exact` is false.
FinalIncongruence final_incongruence(const FinalStateInput& input);

// Abort rate (aborted / all routines) and recovery cost (rollback commands
// per aborted routine, 0 without aborts).
struct RoutineOutcome {
  InvocationId id = 0;
  bool aborted = false;
  size_t rollback_commands = 0;
};
struct AbortStats {
  double abort_rate = 0;
  double rollback_commands_per_abort = 0;
};
AbortStats abort_stats(const std::vector<RoutineOutcome>& outcomes);

}  // namespace mesh::routine
