// A small generated SafeHome workload (sim/routine_workload.h) run by
// `meshsim routines`' runner (sim/routine_workload_run.h) on whole agents
// under WV, GSV, PSV and EV (its schedulers and leases too), several seeds
// each, the same workload per seed under every model. The oracle
// (routine/serial_order_check.h) must hold where the model promises it: GSV
// runs one routine at a time, PSV one per device, they and EV end in a
// state of some serial order (final incongruence 0, check_serial_order)
// and every invocation ends. Under WV the PSV check
// must fail on some seed: an oracle that cannot fail proves nothing. A
// failing seed is printed; SAFEHOME_WORKLOAD_SEED=<seed> replays it.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "routine/serial_key_choice.h"
#include "routine/visibility.h"
#include "sim/routine_workload.h"
#include "sim/routine_workload_run.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

constexpr const char* kPrefix = "SAFEHOME_WORKLOAD";

// 10 routines of 1-3 commands over 5 dimmers, skewed so they conflict, at
// load 4; short commands keep each run to a few virtual seconds.
WorkloadFile conflicting_workload() {
  return parse_workload(
      "[generator]\nroutines = 10\ndevices = 5\nzipf = 1.0\ncommands_min = 1\ncommands_max = 3\n"
      "long_share = 0.2\nlong_ms = 2000\nshort_ms = 300\nload = 4\n",
      "safehome_workload_sim_test.toml");
}

WorkloadRunOptions small_mesh() {
  WorkloadRunOptions options;
  options.nodes = 5;
  return options;
}

// `failures`: devices fail, so invocations may abort or fail (with
// feedback) but must still end.
std::vector<std::string> violations_of(const WorkloadRunResult& r, bool failures = false) {
  std::vector<std::string> out;
  for (const auto& inv : r.invocations) {
    const bool ended = inv.outcome == "ok" || (failures && (inv.outcome == "aborted" || inv.outcome == "failed"));
    if (!ended) out.push_back(fmt::format("invocation {} ({}) ended {}", inv.id, inv.routine, inv.outcome));
  }
  if (r.serial_order) out.push_back("check_serial_order: " + *r.serial_order);
  if (r.final_incongruence.incongruent_devices != 0) {
    out.push_back(fmt::format("final incongruence {} of {} devices", r.final_incongruence.incongruent_devices,
                              r.final_incongruence.devices));
  }
  if (routine::is_global(r.visibility) && r.global_strict)
    out.push_back("check_global_strict: " + *r.global_strict);
  // EV's post-leases let routines that share a device overlap.
  if (r.visibility != routine::Visibility::ev && r.partitioned_strict) {
    out.push_back("check_partitioned_strict: " + *r.partitioned_strict);
  }
  return out;
}

void sweep_strict(routine::Visibility visibility) {
  const WorkloadFile file = conflicting_workload();
  const auto range = test_support::seed_range(kPrefix, 1, 6);
  size_t invocations = 0;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const WorkloadRunResult r = run_workload(instantiate(file, seed), visibility, seed, small_mesh());
    invocations += r.invocations.size();
    if (test_support::report_violations(kPrefix, seed, violations_of(r))) return;
  }
  EXPECT_GT(invocations, 0u);
}

TEST(SafehomeWorkloadSim, GsvRunsOneRoutineAtATimeAndEndsSerially) { sweep_strict(routine::Visibility::gsv); }

TEST(SafehomeWorkloadSim, PsvRunsOneRoutinePerDeviceAndEndsSerially) { sweep_strict(routine::Visibility::psv); }

// Every EV invocation that ran was placed in its devices' lineages first:
// its routine group's record has a placement time.
std::vector<std::string> unplaced_of(const WorkloadRunResult& r) {
  std::vector<std::string> out;
  for (const auto& inv : r.invocations) {
    if (!inv.schedule.commands.empty() && !inv.ev_placement) {
      out.push_back(fmt::format("invocation {} ({}) actuated without a placement time", inv.id, inv.routine));
    }
  }
  return out;
}

// EV ends in a serial order's state too, and its post-leases show: on some
// seed a routine uses a device another one that is still running has given
// up (so the PSV check fails there), or EV would be PSV under another name.
// Placement (the default scheduler, tl) takes time: some invocation's
// placement time is above zero, or the runner does not read it.
TEST(SafehomeWorkloadSim, EvEndsSeriallyAndOverlapsRoutinesThatShareADevice) {
  const WorkloadFile file = conflicting_workload();
  const auto range = test_support::seed_range(kPrefix, 1, 6);
  std::optional<uint64_t> overlapped;
  core::Duration longest_placement{};
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const WorkloadRunResult r = run_workload(instantiate(file, seed), routine::Visibility::ev, seed, small_mesh());
    auto violations = violations_of(r);
    for (auto& unplaced : unplaced_of(r)) violations.push_back(std::move(unplaced));
    if (test_support::report_violations(kPrefix, seed, violations)) return;
    EXPECT_EQ(r.ev_variant, "tl");
    for (const auto& inv : r.invocations) {
      if (inv.ev_placement) longest_placement = std::max(longest_placement, *inv.ev_placement);
    }
    if (r.partitioned_strict && !overlapped) {
      overlapped = seed;
      std::printf("EV post-lease seen at seed %llu: %s\n", static_cast<unsigned long long>(seed),
                  r.partitioned_strict->c_str());
    }
  }
  if (!range.replaying) {
    EXPECT_TRUE(overlapped.has_value()) << "no EV run overlapped routines sharing a device: no post-lease happened";
    EXPECT_GT(longest_placement, core::Duration::zero()) << "no EV invocation took time to be placed";
  }
}

// The other serial-key schedulers (`meshsim routines --ev-scheduler`), and
// TL with both leases off, end in a serial order's state as well, every
// invocation placed before it ran: a scheduler picks a key, the lineages
// keep serializability whatever it picks.
TEST(SafehomeWorkloadSim, EvFcfsJitAndLeasesOffEndSerially) {
  const WorkloadFile file = conflicting_workload();
  WorkloadRunOptions fcfs = small_mesh();
  fcfs.ev_scheduler = routine::EvScheduler::fcfs;
  WorkloadRunOptions jit = small_mesh();
  jit.ev_scheduler = routine::EvScheduler::jit;
  WorkloadRunOptions no_leases = small_mesh();
  no_leases.ev_pre_lease = false;
  no_leases.ev_post_lease = false;
  for (const auto& options : {fcfs, jit, no_leases}) {
    const auto range = test_support::seed_range(kPrefix, 1, 3);
    for (uint64_t seed = range.first; seed < range.end(); ++seed) {
      const WorkloadRunResult r = run_workload(instantiate(file, seed), routine::Visibility::ev, seed, options);
      EXPECT_EQ(r.ev_variant, ev_variant(options));
      auto violations = violations_of(r);
      for (auto& unplaced : unplaced_of(r)) violations.push_back(std::move(unplaced));
      for (auto& v : violations) v.insert(0, ev_variant(options) + ": ");
      if (test_support::report_violations(kPrefix, seed, violations)) return;
    }
  }
}

// Devices fail for good at one instant (SafeHome's failure model, a third
// of the commanded devices): routines abort and roll back, and the end
// state is still a serial order's of the completed routines and the
// failures, one routine at a time (S-GSV), per device (PSV), or with
// post-leases (EV).
TEST(SafehomeWorkloadSim, DeviceFailuresAbortAndRollBackYetEndSerially) {
  WorkloadFile file = conflicting_workload();
  std::get<WorkloadGenerator>(file.content).device_failure_ratio = 0.3;
  for (const auto visibility : {routine::Visibility::sgsv, routine::Visibility::psv, routine::Visibility::ev}) {
    const auto range = test_support::seed_range(kPrefix, 1, 4);
    double abort_rate = 0;
    size_t failures = 0;
    for (uint64_t seed = range.first; seed < range.end(); ++seed) {
      const WorkloadRunResult r = run_workload(instantiate(file, seed), visibility, seed, small_mesh());
      abort_rate += r.aborts.abort_rate;
      failures += r.failures;
      if (test_support::report_violations(kPrefix, seed, violations_of(r, true))) return;
    }
    // Failures must have been injected and have aborted something, or
    // this checked nothing.
    EXPECT_GT(failures, 0u) << routine::to_string(visibility);
    EXPECT_GT(abort_rate, 0.0) << routine::to_string(visibility);
  }
}

TEST(SafehomeWorkloadSim, WvIsCaughtInterleavingAndEveryInvocationEnds) {
  const WorkloadFile file = conflicting_workload();
  const auto range = test_support::seed_range(kPrefix, 1, 6);
  std::optional<uint64_t> caught;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const WorkloadRunResult r = run_workload(instantiate(file, seed), routine::Visibility::wv, seed, small_mesh());
    for (const auto& inv : r.invocations) {
      EXPECT_EQ(inv.outcome, "ok") << test_support::failing_seed(kPrefix, seed) << "invocation " << inv.id;
    }
    if (r.partitioned_strict && !caught) {
      caught = seed;
      std::printf("WV caught at seed %llu: %s\n", static_cast<unsigned long long>(seed), r.partitioned_strict->c_str());
    }
  }
  EXPECT_TRUE(caught.has_value()) << "no WV run interleaved conflicting routines: the PSV check proves nothing";
}

}  // namespace
}  // namespace mesh::sim
