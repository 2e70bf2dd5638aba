#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "core/time.h"
#include "proto/invocation.pb.h"
#include "routine/routine_combo.h"

namespace mesh::routine {

// SafeHome's per-routine latency metrics (safehome.md §7.1), for one
// invocation as its routine group recorded it (Env times of its committed
// steps, so they are what the replicated history says, not a leader's
// belief). What is unknown (not reached yet, or ended before it) is empty.
struct InvocationMetrics {
  // Trigger -> every lock held (EXECUTING began). SafeHome's wait ends at
  // the first command's start, which is this point: the first command is
  // sent once the locks are held (after the APEX plan, if any, which is part
  // of running the routine, not of waiting for it).
  std::optional<core::Duration> wait;
  // Trigger -> end committed (locks released): when the user can count on
  // the routine being over. SafeHome's simulator ends at the last command's
  // end, having no release step; the difference is one release round.
  std::optional<core::Duration> end_to_end;
  // The routine's ideal run time, SafeHome's back-to-back (the sum of its
  // command durations, notes/safehome-code.md; safehome_metrics.h
  // back_to_back): a command occupies its device from when the one before
  // it let go (the first: from EXECUTING) to its outcome, plus the time the
  // routine keeps the device after it (its duration). Commands run back to
  // back once the locks are held, so this is EXECUTING -> the last
  // command's end. Under EV they need not: a command then starts when its
  // leader sent it (CommandStep.started_at_us), and waits between commands
  // do not count. Recorded starts are used whenever every command has one
  // (a command an earlier leader sent has none). Known only for an
  // invocation that ran every command (ended ok): an aborted one did not
  // run the routine.
  std::optional<core::Duration> back_to_back;
  // SafeHome's EV stretch (safehome_metrics.h ev_stretch): (the gaps
  // between its commands + back_to_back) / back_to_back, 1 for a routine
  // that ran back to back. Known with back_to_back and every recorded start.
  std::optional<double> stretch;
  // end_to_end / back_to_back (SafeHome's latency overhead): 1 is a routine
  // that never waited. Known with both.
  std::optional<double> latency_overhead;
  // The commands its rollback undid or tried to (SafeHome's recovery cost
  // counts these per aborted routine).
  size_t rollback_commands = 0;
};

// `holds[i]`: how long the routine keeps its device after command i of
// the invocation's whole command list (precondition commands included,
// routine/routine_combo.h), zero for none. A command that failed keeps
// nothing (its routine leader goes on at once).
InvocationMetrics invocation_metrics(const proto::InvocationMsg& invocation, const std::vector<core::Duration>& holds);

// The holds of an invocation of `spec` that ran `plan`. Only for an
// invocation of this very definition: another one's durations may differ.
std::vector<core::Duration> command_holds(const RoutineSpec& spec, const std::vector<PreconditionCommand>& plan);

}  // namespace mesh::routine
