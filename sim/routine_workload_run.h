#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "routine/routine_schedule.h"
#include "routine/safehome_metrics.h"
#include "routine/serial_key_choice.h"
#include "routine/visibility.h"
#include "sim/routine_workload.h"

namespace mesh::sim {

// Runs a SafeHome workload (sim/routine_workload.h) on a MeshSim mesh of
// whole agents under one visibility model and measures it as SafeHome's §7
// does, from what the devices did rather than from what leaders believe:
//
//  - every arrival is a manual run (RoutineService::run) from a node the run
//    seed picks, at settle + its time; the mesh then runs until every
//    invocation has ended (bounded);
//  - the schedule is read from the emulated devices' actuation logs: a
//    command starts when its device actuated it and occupies the device for
//    its duration (the paper's [start, start + duration)); the invocation
//    behind each actuation is named by its command id, and its outcome is
//    its routine group's record;
//  - safehome_metrics.h turns the schedule into wait, end-to-end latency,
//    latency overhead and temporary incongruence per invocation, and
//    parallelism level, order mismatch, final incongruence and abort rate
//    per run;
//  - serial_order_check.h is the oracle: the end state is that of a serial
//    order (check_serial_order), and the invocations' spans, from first
//    actuation to last command end, never overlap at all (GSV,
//    check_global_strict) or on a device (PSV, check_partitioned_strict).
//    Every check runs under every model, so WV's failures are visible.
// A device is written attribute by attribute, so the oracle and final
// incongruence treat each DEVICE.ATTRIBUTE as one device. The workload's
// device failures (Workload::failures) are injected at the emulated devices
// (set_up(false), and back for a restart); they enter the oracle as
// failure and restart items, a rollback's undo commands as rollbacks, and a
// completed routine intends only the writes of its commands that succeeded
// (a best-effort command on a failed device writes nothing).
struct WorkloadRunOptions {
  int nodes = 7;
  // Mesh formation (OLSR, Medley, k-group genesis) before the first arrival.
  core::Duration settle = std::chrono::seconds(30);
  // Devices per device group (kgroup's clustering): small groups spread a
  // routine's locks over several groups, as in a real home.
  size_t devices_per_cluster = 4;
  // A manual run's trigger must be committed within this.
  core::Duration trigger_timeout = std::chrono::seconds(30);
  // EV only (routine/routine_leaders.h, "Serial keys"): how an invocation
  // chooses its serial key, and whether pre- and post-leases happen; the
  // agents' `[routines] ev_scheduler`, `ev_pre_lease`, `ev_post_lease`.
  routine::EvScheduler ev_scheduler = routine::EvScheduler::tl;
  bool ev_pre_lease = true;
  bool ev_post_lease = true;
};

// The EV variant `options` name, for file names and tables: "tl", "fcfs" or
// "jit", then "-nopre" and "-nopost" for a lease turned off (the defaults
// give "tl").
std::string ev_variant(const WorkloadRunOptions& options);

// What happened to one arrival.
struct InvocationRecord {
  routine::InvocationId id = 0;  // arrival order, from 1
  std::string routine;
  core::Duration arrival{};  // after the workload's start (settle)
  // ok, failed, aborted (the routine group's outcome), unfinished (not
  // ended by the bound), not_triggered (the run never committed).
  std::string outcome;
  // The commands that actuated, on the simulator's clock; empty when none.
  routine::ScheduledRoutine schedule;
  double temporary_incongruence = 0;
  // EV: its routine group's record of the serial key. The placement time
  // (first key to placed in every lineage, SafeHome's Fig. 15c), none when
  // the invocation was never placed (or the model is not EV); the re-keys.
  std::optional<core::Duration> ev_placement;
  uint32_t ev_rekeys = 0;
};

struct WorkloadRunResult {
  routine::Visibility visibility = routine::Visibility::psv;
  std::string ev_variant;  // ev_variant(options) under EV, else empty
  uint64_t seed = 0;
  core::TimePoint origin{};  // the workload's time zero on the simulator's clock
  std::vector<InvocationRecord> invocations;
  size_t unfinished = 0;
  double parallelism_level = 0;
  double order_mismatch = 0;
  routine::FinalIncongruence final_incongruence;
  routine::AbortStats aborts;
  size_t failures = 0;  // device failures the run injected (Workload::failures)
  // The oracle's findings; none: the check passed.
  std::optional<std::string> serial_order;
  std::optional<std::string> global_strict;
  std::optional<std::string> partitioned_strict;
};

WorkloadRunResult run_workload(const Workload& workload, routine::Visibility visibility, uint64_t seed,
                               const WorkloadRunOptions& options = {});

// CSV, one row per invocation:
// model,seed,invocation,routine,arrival_ms,start_ms,end_ms,wait_ms,e2e_ms,
// overhead,temporary_incongruence,outcome,ev_stretch,ev_placement_ms,
// ev_rekeys (times after the workload's start; the timing fields and
// ev_stretch are empty for an invocation that actuated nothing). The EV
// columns: ev_stretch is routine::ev_stretch of the actuated schedule (1:
// its commands ran back to back), ev_placement_ms the time from its first
// serial key to being placed in every lineage and ev_rekeys how often it
// re-keyed, from its routine group's record; under other models
// ev_placement_ms and ev_rekeys are empty, and so is ev_placement_ms for an
// EV invocation never placed. `model` is the visibility model only (ev for
// every EV variant; meshsim puts the variant in the file name).
std::string invocations_csv_header();
std::string invocations_csv_rows(const WorkloadRunResult& result);
// CSV, one row per run:
// model,seed,invocations,ok,unfinished,e2e_p50_ms,e2e_p90_ms,
// parallelism_level,order_mismatch,final_incongruence,final_incongruence_exact,
// temporary_incongruence_share (routines attacked at least once, the paper's
// Fig. 12 metric),temporary_incongruence_mean,abort_rate,serial_order,
// global_strict,partitioned_strict (pass or fail),device_failures,
// rollback_commands_per_abort (the paper's Fig. 13 "recovery"),ev_variant
// (ev_variant(options) under EV, else empty).
std::string summary_csv_header();
std::string summary_csv_row(const WorkloadRunResult& result);

}  // namespace mesh::sim
