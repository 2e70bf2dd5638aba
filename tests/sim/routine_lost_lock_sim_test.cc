// An invocation that loses a device lock stops (whole agents on virtual
// time, MeshSim). A routine r runs three commands, d0 (kept 6 s), d1, d2.
// While d0's duration holds, the test makes a device group take one of the
// invocation's locks back, as a reclaim does when the holder's routine
// group does not answer (the lock release with `reclaimed`, committed by
// the device group's leader). Then:
//  - the first refusal for that lock (COMMAND_FENCED) ends the execution:
//    the invocation ends failed with the reason, its later commands are
//    never sent (nothing after the fenced command is actuated);
//  - a lock whose renewal a device leader answered as lost stops the
//    invocation before its next command, so not even the fenced command is
//    tried;
//  - either way every lock is free afterwards.
// When a routine's leader crashes, the Camera grants of the resources it
// named (`uses`) die with it:
//  - an executing invocation is aborted by the new leader (it cannot hold
//    the crashed node's grant, and another routine may use the resource
//    meanwhile), and the resource goes to the next routine that asks; the
//    rollback takes the resource again before it undoes anything, and if
//    the resource's new holder waits for a device the rollback holds, that
//    holder makes way (gives the resource back and acquires again);
//  - an invocation still acquiring gives the recorded grants up and takes
//    every resource again in order, then runs after the routine holding
//    the resource it waited for.
// A planned leader change is avoided instead: a routine group's epoch
// migration waits while one of its invocations holds a Camera grant.
// Each case runs over several seeds (topology, delays); a failing seed is
// printed and ROUTINE_LOST_LOCK_SEED=<seed> replays it with routine logs.
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_target.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using routine::Attributes;
using routine::DeviceKind;
using routine::DeviceSpec;
using routine::EmulatedDevice;
using routine::RoutineSpec;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The node leading the newest instance of `target`, and its replica.
std::pair<size_t, kgroup::GroupReplica*> leader_of(MeshSim& sim, const std::string& target) {
  std::pair<size_t, kgroup::GroupReplica*> best{0, nullptr};
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* r = node->kgroups().host().latest(target);
    if (r == nullptr || !r->serving()) continue;
    if (best.second == nullptr || std::make_pair(r->config().epoch, r->config().generation) >
                                      std::make_pair(best.second->config().epoch, best.second->config().generation)) {
      best = {i, r};
    }
  }
  return best;
}

// Four plugs d0..d3 on a 3x3 grid of agents (no node whose crash cuts the
// mesh), and the given routines.
class Bench {
 public:
  // `epoch_length`: every group's (0: the default hour).
  Bench(uint64_t seed, std::vector<RoutineSpec> routines, core::Duration renew_interval,
        core::Duration epoch_length = core::Duration::zero()) {
    const std::string toml = fmt::format(
        "[topology]\nkind = \"grid\"\nwidth = 3\nheight = 3\n[link]\ndelay_ms = {}\njitter_ms = {}\n"
        "[run]\nduration_s = 600\n",
        1 + seed % 4, seed % 3);
    for (int i = 0; i < 4; ++i) {
      DeviceSpec spec;
      spec.id = fmt::format("d{}", i);
      spec.kind = DeviceKind::plug;
      spec.location = {static_cast<double>(20 * i), 0, 0};
      spec.driver = "emulated://" + spec.id;
      catalog_.push_back(spec);
      devices_.push_back(std::make_unique<EmulatedDevice>(spec, Attributes{{"power", false}}));
    }
    MeshSim::Options options;
    options.start_spread = seconds(1);
    options.configure = [this, routines, renew_interval, epoch_length](agent::NodeConfig& config) {
      if (epoch_length != core::Duration::zero()) config.kgroup.epoch_length = epoch_length;
      config.kgroup.selection.k = 3;
      config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
      config.kgroup.selection.clusters.devices_per_cluster = 1;
      config.devices.catalog = catalog_;
      config.devices.routines = routines;
      config.devices.catalog_digest = "sim";
      config.routines.leaders.renew_interval = renew_interval;
      // Locks held from the first command to the end (PSV): under EV a lock
      // not used yet is only a lineage entry, and one taken back before its
      // first use is placed again (routine/routine_leaders.h, "Serial keys").
      config.routines.leaders.visibility = routine::Visibility::psv;
    };
    options.drivers = [this](size_t, core::Env& env) {
      factories_.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
      for (auto& device : devices_) factories_.back()->add(*device);
      return factories_.back().get();
    };
    sim_ = std::make_unique<MeshSim>(parse_scenario(toml, "routine_lost_lock.toml"), seed, options);
    sim_->run_until(core::TimePoint(seconds(30)));
  }

  MeshSim& sim() { return *sim_; }
  EmulatedDevice& device(int i) { return *devices_.at(static_cast<size_t>(i)); }
  void run_for(core::Duration d) { sim_->run_until(sim_->simulator().now() + d); }
  // Runs `routine` from the first live agent.
  void start(const std::string& routine) {
    for (size_t i = 0; i < sim_->size(); ++i) {
      if (agent::Node* node = sim_->node(i)) {
        node->routines().run(routine, false, seconds(10), [](const auto&) {});
        return;
      }
    }
  }
  const routine::RoutineGroupState::Invocation* invocation(const std::string& routine, uint64_t seq) {
    kgroup::GroupReplica* leader = leader_of(*sim_, "routine:" + routine).second;
    const auto* st =
        leader == nullptr ? nullptr : dynamic_cast<const routine::RoutineGroupState*>(&leader->state_machine());
    return st == nullptr ? nullptr : st->invocation(seq);
  }
  // Runs until `done` holds or `limit` passed; whether it holds.
  bool run_until(const std::function<bool()>& done, core::Duration limit = seconds(60)) {
    const core::TimePoint give_up = sim_->simulator().now() + limit;
    while (!done() && sim_->simulator().now() < give_up) run_for(milliseconds(100));
    return done();
  }
  std::string device_group(const std::string& device) {
    for (size_t i = 0; i < sim_->size(); ++i) {
      if (agent::Node* node = sim_->node(i)) return node->kgroups().selector().device_group(device).to_string();
    }
    return {};
  }
  // Devices still locked at their group's leader.
  std::vector<std::string> locked() {
    std::vector<std::string> out;
    for (const auto& device : catalog_) {
      kgroup::GroupReplica* leader = leader_of(*sim_, device_group(device.id)).second;
      const auto* ds =
          leader == nullptr ? nullptr : dynamic_cast<const routine::DeviceGroupState*>(&leader->state_machine());
      const auto* lock = ds == nullptr ? nullptr : ds->locks().find(device.id);
      if (lock != nullptr && !lock->free()) out.push_back(device.id + " by " + lock->holder);
    }
    return out;
  }

 private:
  std::vector<DeviceSpec> catalog_;
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories_;
  std::unique_ptr<MeshSim> sim_;
};

RoutineSpec make_routine(const std::string& id, const std::vector<int>& devices, core::Duration first_kept,
                         std::vector<std::string> uses = {}) {
  RoutineSpec r;
  r.id = id;
  r.trigger_text = "manual";
  r.trigger = routine::build_trigger("manual", "", {}).value();
  r.uses = std::move(uses);
  for (const int device : devices) {
    routine::RoutineCommand command;
    command.device = fmt::format("d{}", device);
    command.values = {{"power", true}};
    if (r.commands.empty()) command.duration = first_kept;
    r.commands.push_back(command);
  }
  return r;
}

struct Case {
  const char* name;
  int lost_device;           // whose lock the device group takes back
  bool renewals;             // renewals every second, or none during the run
  std::string reason;        // in the invocation's stop reason
  std::vector<int> never_actuated;
};

// Violations of the case's expectations, empty if it held.
std::vector<std::string> run(const Case& c, uint64_t seed) {
  std::vector<std::string> violations;
  Bench bench(seed, {make_routine("r", {0, 1, 2}, seconds(6))}, c.renewals ? seconds(1) : seconds(120));
  bench.start("r");
  // d0 actuated: the invocation executes and holds every lock.
  if (!bench.run_until([&] { return !bench.device(0).actuations().empty(); }) ||
      bench.invocation("r", 1) == nullptr) {
    violations.push_back("the invocation never actuated d0");
    return violations;
  }
  const std::string holder = routine::holder_name("r", *bench.invocation("r", 1));

  // The device group takes the lock back.
  const std::string device = fmt::format("d{}", c.lost_device);
  const std::string group = bench.device_group(device);
  kgroup::GroupReplica* device_leader = leader_of(bench.sim(), group).second;
  if (device_leader == nullptr) {
    violations.push_back(fmt::format("no leader for {}", group));
    return violations;
  }
  proto::DeviceUpdate reclaim;
  reclaim.mutable_unlock()->set_device(device);
  reclaim.mutable_unlock()->set_holder(holder);
  reclaim.mutable_unlock()->set_reclaimed(true);
  bool reclaimed = false;
  device_leader->submit(
      kgroup::ClientStateMachine::encode_write(0x5eed0000 + seed, routine::DeviceGroupState::encode(reclaim)),
      [&reclaimed](const kgroup::SubmitResult& result) {
        reclaimed = result.status == kgroup::SubmitStatus::committed;
      });
  bench.run_for(seconds(60));
  if (!reclaimed) violations.push_back("the reclaim was not committed");

  const auto* invocation = bench.invocation("r", 1);
  if (invocation == nullptr || !invocation->done()) {
    violations.push_back("the invocation did not end");
    return violations;
  }
  if (invocation->outcome != proto::INVOCATION_FAILED) {
    violations.push_back(fmt::format("the invocation ended {} ({}), not failed",
                                     proto::InvocationOutcome_Name(invocation->outcome), invocation->detail));
  }
  if (invocation->stop_reason.find(c.reason) == std::string::npos) {
    violations.push_back(fmt::format("the stop reason '{}' does not say '{}'", invocation->stop_reason, c.reason));
  }
  for (const int i : c.never_actuated) {
    if (!bench.device(i).actuations().empty()) {
      violations.push_back(fmt::format("d{} was actuated after the lock was lost", i));
    }
  }
  for (const auto& still : bench.locked()) violations.push_back("still locked: " + still);
  return violations;
}

// How long a crash may keep a routine from ending: far above membership's
// failure detection plus a group's re-selection and election.
constexpr core::Duration kAfterCrash = seconds(300);

bool ended(Bench& bench, const std::string& routine) {
  const auto* invocation = bench.invocation(routine, 1);
  return invocation != nullptr && invocation->done();
}

// The last actuation of a device, if any.
std::optional<core::TimePoint> last_actuation(EmulatedDevice& device) {
  if (device.actuations().empty()) return std::nullopt;
  return device.actuations().back().at;
}

// Starts r, crashes its leader once r actuated d0, starts s, and runs until
// both ended. The crashed node, or nullopt with the reason in `violations`.
std::optional<size_t> crash_r_leader_then_run_s(Bench& bench, std::vector<std::string>& violations) {
  bench.start("r");
  if (!bench.run_until([&] { return !bench.device(0).actuations().empty(); })) {
    violations.push_back("r never actuated d0");
    return std::nullopt;
  }
  const auto [victim, replica] = leader_of(bench.sim(), "routine:r");
  if (replica == nullptr) {
    violations.push_back("nobody leads routine:r");
    return std::nullopt;
  }
  bench.sim().crash(victim);
  bench.start("s");
  // A crashed member's groups may re-select before they elect again.
  bench.run_until([&] { return ended(bench, "r") && ended(bench, "s"); }, kAfterCrash);
  const auto* r = bench.invocation("r", 1);
  const auto* s = bench.invocation("s", 1);
  if (r == nullptr || !r->done()) violations.push_back("r did not end");
  if (s == nullptr || !s->done()) violations.push_back("s did not end");
  if (!violations.empty()) return std::nullopt;
  return victim;
}

// r (uses pump) keeps d0 for 6 s, then d1; its leader crashes in between.
// The new leader cannot hold the crashed node's Camera grant: it aborts r
// and undoes d0 under r's device lock (d1 never actuated) and a pump grant
// of its own, and s (uses pump, d2) still gets the pump.
std::vector<std::string> resource_lost_with_its_leader(uint64_t seed) {
  std::vector<std::string> violations;
  Bench bench(seed, {make_routine("r", {0, 1}, seconds(6), {"pump"}), make_routine("s", {2}, seconds(0), {"pump"})},
              seconds(1));
  const std::optional<size_t> victim = crash_r_leader_then_run_s(bench, violations);
  if (!victim) return violations;
  const auto* r = bench.invocation("r", 1);
  const auto* s = bench.invocation("s", 1);
  if (r->outcome != proto::INVOCATION_ABORTED || r->abort_reason.find("resource pump") == std::string::npos) {
    violations.push_back(fmt::format("r ended {} ('{}'), not aborted for the pump",
                                     proto::InvocationOutcome_Name(r->outcome), r->detail));
  }
  if (!bench.device(1).actuations().empty()) violations.push_back("r went on to d1 without the pump");
  // Rolled back under the device lock it still held: d0's last actuation is
  // r's undo.
  const auto& d0 = bench.device(0).actuations();
  if (d0.empty() || d0.back().command_id.find("r#1") != 0 || d0.back().command_id.find(".undo") == std::string::npos) {
    violations.push_back(fmt::format("d0's last actuation is {}, not r's undo ({})",
                                     d0.empty() ? std::string("none") : d0.back().command_id, r->detail));
  }
  if (s->outcome != proto::INVOCATION_OK) {
    violations.push_back(fmt::format("s ended {} ('{}')", proto::InvocationOutcome_Name(s->outcome), s->detail));
  }
  const auto pump = r->resources.find("pump");
  if (pump == r->resources.end() || !pump->second.for_rollback ||
      pump->second.holder == bench.sim().id_of(*victim).value()) {
    violations.push_back("r's undo did not run under a pump grant taken again for it");
  }
  for (const auto& still : bench.locked()) violations.push_back("still locked: " + still);
  return violations;
}

// As above, but s (uses pump) needs d1, which r holds: once r's leader
// crashed, s takes the pump and waits for d1, while r's rollback waits for
// the pump. Asked to make way, s gives the pump back and acquires again,
// so r rolls back under the pump and s then runs: r aborted with d0 undone,
// s ok, and s's actuation after r's undo.
std::vector<std::string> resource_holder_makes_way_for_a_rollback(uint64_t seed) {
  std::vector<std::string> violations;
  Bench bench(seed, {make_routine("r", {0, 1}, seconds(6), {"pump"}), make_routine("s", {1}, seconds(0), {"pump"})},
              seconds(1));
  const std::optional<size_t> victim = crash_r_leader_then_run_s(bench, violations);
  if (!victim) return violations;
  const auto* r = bench.invocation("r", 1);
  const auto* s = bench.invocation("s", 1);
  if (r->outcome != proto::INVOCATION_ABORTED || r->undone.count(0) == 0 || !r->stop_reason.empty()) {
    violations.push_back(
        fmt::format("r ended {} ('{}'), not rolled back", proto::InvocationOutcome_Name(r->outcome), r->detail));
  }
  const auto& d0 = bench.device(0).actuations();
  const auto& d1 = bench.device(1).actuations();
  const bool r_first_on_d1 = !d1.empty() && d1.front().command_id.find("r#1") == 0;
  if (r_first_on_d1) violations.push_back("r went on to d1 without the pump");
  if (s->outcome != proto::INVOCATION_OK) {
    violations.push_back(fmt::format("s ended {} ('{}')", proto::InvocationOutcome_Name(s->outcome), s->detail));
  } else if (d0.empty() || d1.empty() || d1.front().at < d0.back().at) {
    violations.push_back("s actuated d1 before r's undo of d0");
  }
  for (const auto& still : bench.locked()) violations.push_back("still locked: " + still);
  return violations;
}

// s (uses pump) keeps d2 for 8 s, then d3. r (uses boiler and pump) takes
// the boiler and waits for the pump; its leader crashes meanwhile. The new
// leader gives the recorded boiler grant up, takes both again in order and
// runs r after s: r ends ok with grants of a live node.
std::vector<std::string> resources_taken_again_while_acquiring(uint64_t seed) {
  std::vector<std::string> violations;
  Bench bench(seed,
              {make_routine("s", {2, 3}, seconds(8), {"pump"}), make_routine("r", {0, 1}, seconds(0), {"boiler", "pump"})},
              seconds(1));
  bench.start("s");
  if (!bench.run_until([&] { return !bench.device(2).actuations().empty(); })) {
    violations.push_back("s never actuated d2");
    return violations;
  }
  bench.start("r");
  if (!bench.run_until([&] {
        const auto* r = bench.invocation("r", 1);
        return r != nullptr && r->resources.count("boiler") != 0;
      })) {
    violations.push_back("r never recorded the boiler");
    return violations;
  }
  const size_t victim = leader_of(bench.sim(), "routine:r").first;
  bench.sim().crash(victim);
  bench.run_until([&] { return ended(bench, "r") && ended(bench, "s"); }, kAfterCrash);
  const auto* r = bench.invocation("r", 1);
  const auto* s = bench.invocation("s", 1);
  if (r == nullptr || !r->done()) violations.push_back("r did not end");
  if (s == nullptr || !s->done()) violations.push_back("s did not end");
  if (!violations.empty()) return violations;
  if (r->outcome != proto::INVOCATION_OK) {
    violations.push_back(fmt::format("r ended {} ('{}')", proto::InvocationOutcome_Name(r->outcome), r->detail));
  }
  for (const auto& [resource, grant] : r->resources) {
    if (grant.holder == bench.sim().id_of(victim).value()) {
      violations.push_back(fmt::format("r ran under the crashed leader's grant of {}", resource));
    }
  }
  if (r->resources.size() != 2) violations.push_back(fmt::format("r recorded {} resources", r->resources.size()));
  // s shares the pump with r: their actuations never interleave.
  const auto s_last = std::max(last_actuation(bench.device(2)), last_actuation(bench.device(3)));
  const auto r_first = bench.device(0).actuations().empty() ? std::nullopt
                                                            : std::optional(bench.device(0).actuations().front().at);
  if (!r_first || !s_last || *r_first < *s_last) violations.push_back("r actuated before s was done with the pump");
  // s ends ok, or is aborted (and rolled back) for the pump if the crash
  // moved its group's leadership (the crashed node may have been its leader
  // or a member).
  if (s->outcome != proto::INVOCATION_OK && s->abort_reason.find("resource pump") == std::string::npos) {
    violations.push_back(fmt::format("s ended {} ('{}')", proto::InvocationOutcome_Name(s->outcome), s->detail));
  }
  for (const auto& still : bench.locked()) violations.push_back("still locked: " + still);
  return violations;
}

// r (uses pump) keeps d0 for 40 s, then d1, under 60 s epochs, started
// so that routine:r's epoch ends while r holds d0. Its group puts the
// migration off until r ended: r ends ok under the one pump grant it took,
// and the group migrates once r is done (without the postponement a new
// leader would abort r and roll it back, as in the crash cases above).
std::vector<std::string> migration_waits_for_the_resource_holder(uint64_t seed) {
  std::vector<std::string> violations;
  constexpr core::Duration kEpoch = seconds(60);
  Bench bench(seed, {make_routine("r", {0, 1}, seconds(40), {"pump"})}, seconds(1), kEpoch);
  const kgroup::EpochSchedule schedule(kEpoch, core::TimePoint{});
  const kgroup::GroupTarget target = kgroup::GroupTarget::parse("routine:r").value();
  // Start r 10-25 s before an epoch end, so the end falls inside d0's 40 s.
  core::TimePoint epoch_end{};
  bench.run_until(
      [&] {
        const core::TimePoint now = bench.sim().simulator().now();
        epoch_end = schedule.epoch_end(target, schedule.epoch_at(target, now));
        return epoch_end - now > seconds(10) && epoch_end - now < seconds(25);
      },
      kEpoch);
  bench.start("r");
  const uint64_t epoch_before = schedule.epoch_at(target, bench.sim().simulator().now());
  if (!bench.run_until([&] { return !bench.device(0).actuations().empty(); }, seconds(10)) ||
      bench.device(0).actuations().front().at >= epoch_end) {
    violations.push_back("r did not actuate d0 before its group's epoch ended");
    return violations;
  }
  // The migration must wait for r: until r is done, r's group is the one
  // of the epoch it started in.
  std::optional<core::TimePoint> migrated_at;
  std::optional<core::TimePoint> ended_at;
  bench.run_until(
      [&] {
        const auto [node, replica] = leader_of(bench.sim(), "routine:r");
        if (!ended_at && ended(bench, "r")) ended_at = bench.sim().simulator().now();
        if (!migrated_at && replica != nullptr && replica->config().epoch > epoch_before) {
          migrated_at = bench.sim().simulator().now();
        }
        return migrated_at.has_value() && ended_at.has_value();
      },
      seconds(120));
  const auto* r = bench.invocation("r", 1);
  if (r == nullptr || !r->done()) {
    violations.push_back("r did not end");
    return violations;
  }
  if (r->outcome != proto::INVOCATION_OK) {
    violations.push_back(fmt::format("r ended {} ('{}')", proto::InvocationOutcome_Name(r->outcome), r->detail));
  }
  if (!migrated_at) {
    violations.push_back("routine:r never migrated");
  } else if (ended_at && *migrated_at < *ended_at) {
    violations.push_back(fmt::format("routine:r migrated at {} ms, before r ended at {} ms",
                                     core::to_millis(migrated_at->time_since_epoch()),
                                     core::to_millis(ended_at->time_since_epoch())));
  }
  if (bench.device(1).actuations().empty()) violations.push_back("r never actuated d1");
  for (const auto& still : bench.locked()) violations.push_back("still locked: " + still);
  return violations;
}

void sweep(const Case& c) {
  const test_support::SeedRange range = test_support::seed_range("ROUTINE_LOST_LOCK", 1, 8);
  if (range.replaying) core::set_log_level("info", "routine");
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    if (test_support::report_violations("ROUTINE_LOST_LOCK", seed, run(c, seed))) return;
  }
  std::printf("%s: %llu seeds\n", c.name, static_cast<unsigned long long>(range.end() - range.first));
}

TEST(RoutineLostLockSim, AFencedCommandStopsTheInvocation) {
  // No renewal in the run: the leader learns of the loss from the refusal.
  sweep({"fenced", 1, false, "fenced", {1, 2}});
}

TEST(RoutineLostLockSim, ALockReportedLostStopsTheInvocationBeforeItsNextCommand) {
  sweep({"renewal answered lost", 2, true, "taken back", {1, 2}});
}

void sweep_scenario(const char* name, std::vector<std::string> (*scenario)(uint64_t)) {
  const test_support::SeedRange range = test_support::seed_range("ROUTINE_LOST_LOCK", 1, 8);
  if (range.replaying) core::set_log_level("info", "routine");
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    if (test_support::report_violations("ROUTINE_LOST_LOCK", seed, scenario(seed))) return;
  }
  std::printf("%s: %llu seeds\n", name, static_cast<unsigned long long>(range.count));
}

TEST(RoutineLostLockSim, AResourceLostWithItsLeaderAbortsAndRollsBackTheInvocation) {
  sweep_scenario("resource lost with its leader", resource_lost_with_its_leader);
}

TEST(RoutineLostLockSim, AResourceHolderWaitingForARollbackMakesWay) {
  sweep_scenario("resource holder makes way", resource_holder_makes_way_for_a_rollback);
}

TEST(RoutineLostLockSim, ANewLeaderTakesTheResourcesAgainWhileAcquiring) {
  sweep_scenario("resources taken again", resources_taken_again_while_acquiring);
}

TEST(RoutineLostLockSim, AnEpochMigrationWaitsForAnInvocationHoldingAResource) {
  sweep_scenario("migration waits for the resource holder", migration_waits_for_the_resource_holder);
}

}  // namespace
}  // namespace mesh::sim
