#pragma once

namespace mesh::routine {

// Deliberate bugs, off unless a test turns them on. The whole-agent
// simulation sweeps use them to show that each of their checkers fails on
// a broken build (a checker that cannot fail proves nothing). Each names
// the guarantee it breaks; none is reachable from configuration, and the
// code paths they sit on are single-threaded like the rest of the
// protocol, so a test that sets one and resets it afterwards affects only
// its own runs.
struct FaultPoints {
  // Locks: every request is granted at once, taking the lock from its
  // holder, and actuation skips the fencing check (safety).
  bool ignore_locks = false;
  // Routine leaders take none of the resources a routine names (`uses`):
  // routines sharing only a resource run at once (safety of resources).
  bool ignore_uses = false;
  // Device leaders call the driver twice per command (exactly once).
  bool actuate_twice = false;
  // Routine leaders end invocations without releasing their locks
  // (liveness, no leaked lock).
  bool skip_release = false;
  // Routine groups stamp a trigger with a per-process counter instead of
  // the committed time, so replicas diverge (inheritance).
  bool nondeterministic_trigger = false;
  // A rollback sends each undone command's own values again instead of the
  // state before it (atomicity: an aborted invocation's effects stay).
  bool undo_repeats_command = false;
  // A rollback restores the state before each command even where the
  // routine gives undo values (SafeHome's user-given undo is lost).
  bool ignore_undo_values = false;
  // A failed must command does not abort its invocation: the commands after
  // it run (atomicity).
  bool ignore_must = false;
  // Routine leaders deduce a combo from the device states they read when
  // the invocation began taking its locks, not once it holds them all (APEX
  // isolation: another combo may change a precondition in between).
  bool stale_precondition_states = false;
  // Routine leaders skip the finish point's failure serialization: a routine
  // completes whatever device failed or restarted while it ran (SafeHome §3
  // under GSV, S-GSV and PSV).
  bool ignore_device_events = false;
  // EV: routine leaders give a device's lock up after their first command
  // on it instead of their last, so another routine can write the device
  // between two of theirs (serializability).
  bool lease_after_first_use = false;
  // Wound-wait: an invocation that waits for a younger one's lock never
  // wounds it, so wait cycles through aggressive invocations deadlock.
  bool never_wound = false;
  // Wound-wait: conservative (SLA, OLA) invocations can be wounded too (their
  // lock requests carry an age) and abort even while executing, as an
  // aggressive one does (APEX §7.1: once executing, they never lose).
  bool conservative_woundable = false;
  // Device leaders finish a command ok as soon as its driver reports it
  // done, without seeing its effect (APEX §7.3 actuation failures).
  bool trust_actuation_reports = false;
  // EV lineages: a free lock goes to the lowest entry that asks for it, not
  // to the lowest entry, so a routine with a higher serial key can use a
  // device before a lower one that uses it later (a precedence cycle).
  bool grant_out_of_key_order = false;
  // Routine leaders run an ad hoc combo's command without its precondition
  // graph, as `device set --ignore-preconditions` sends it (APEX
  // consistency of ad hoc combos, routine/adhoc_combo.h).
  bool adhoc_ignores_rules = false;
  // A precondition command joins the run of the commands before it whatever
  // their graph stage, so it goes out before the deeper precondition it
  // needs took effect (APEX consistency of runs, routine/routine_combo.h).
  bool runs_span_stages = false;
};

FaultPoints& fault_points();

}  // namespace mesh::routine
