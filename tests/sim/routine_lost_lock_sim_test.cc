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
// Each case runs over several seeds (topology, delays); a failing seed is
// printed and ROUTINE_LOST_LOCK_SEED=<seed> replays it with routine logs.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
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

class QuietLogs : public ::testing::Environment {
 public:
  void SetUp() override { core::set_log_level("off"); }
};
const ::testing::Environment* const kQuietLogs = ::testing::AddGlobalTestEnvironment(new QuietLogs);

// The replica of `target` leading the newest instance, if any.
kgroup::GroupReplica* leader_of(MeshSim& sim, const std::string& target) {
  kgroup::GroupReplica* best = nullptr;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* r = node->kgroups().host().latest(target);
    if (r == nullptr || !r->serving()) continue;
    if (best == nullptr || std::make_pair(r->config().epoch, r->config().generation) >
                               std::make_pair(best->config().epoch, best->config().generation)) {
      best = r;
    }
  }
  return best;
}

struct Case {
  const char* name;
  std::string lost_device;   // whose lock the device group takes back
  bool renewals;             // renewals every second, or none during the run
  std::string reason;        // in the invocation's stop reason
  std::vector<std::string> never_actuated;
};

// Violations of the case's expectations, empty if it held.
std::vector<std::string> run(const Case& c, uint64_t seed) {
  std::vector<std::string> violations;
  const std::string toml = fmt::format(
      "[topology]\nkind = \"random\"\nnodes = 5\nseed = {}\n[link]\ndelay_ms = {}\njitter_ms = 1\n"
      "[run]\nduration_s = 300\n",
      seed, 1 + seed % 4);
  std::vector<std::unique_ptr<EmulatedDevice>> devices;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  std::vector<DeviceSpec> catalog;
  for (int i = 0; i < 3; ++i) {
    DeviceSpec spec;
    spec.id = fmt::format("d{}", i);
    spec.kind = DeviceKind::plug;
    spec.location = {static_cast<double>(20 * i), 0, 0};
    spec.driver = "emulated://" + spec.id;
    catalog.push_back(spec);
    devices.push_back(std::make_unique<EmulatedDevice>(spec, Attributes{{"power", false}}));
  }
  RoutineSpec r;
  r.id = "r";
  r.trigger_text = "manual";
  r.trigger = routine::build_trigger("manual", "", {}).value();
  for (int i = 0; i < 3; ++i) {
    routine::RoutineCommand command;
    command.device = fmt::format("d{}", i);
    command.values = {{"power", true}};
    if (i == 0) command.duration = seconds(6);
    r.commands.push_back(command);
  }

  MeshSim::Options options;
  options.start_spread = seconds(1);
  options.configure = [&](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 1;
    config.devices.catalog = catalog;
    config.devices.routines = {r};
    config.devices.catalog_digest = "sim";
    config.routines.leaders.renew_interval = c.renewals ? seconds(1) : seconds(120);
  };
  options.drivers = [&](size_t, core::Env& env) {
    factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices) factories.back()->add(*device);
    return factories.back().get();
  };
  MeshSim sim(parse_scenario(toml, "routine_lost_lock.toml"), seed, options);
  sim.run_until(core::TimePoint(seconds(30)));
  sim.node(0)->routines().run("r", false, seconds(10), [](const auto&) {});

  // Wait for d0's actuation: the invocation executes and holds every lock.
  auto routine_state = [&]() -> const routine::RoutineGroupState* {
    kgroup::GroupReplica* leader = leader_of(sim, "routine:r");
    return leader == nullptr ? nullptr : dynamic_cast<const routine::RoutineGroupState*>(&leader->state_machine());
  };
  const core::TimePoint give_up = sim.simulator().now() + seconds(60);
  while (devices[0]->actuations().empty() && sim.simulator().now() < give_up) {
    sim.run_until(sim.simulator().now() + milliseconds(100));
  }
  const routine::RoutineGroupState* st = routine_state();
  const auto* invocation = st == nullptr ? nullptr : st->invocation(1);
  if (devices[0]->actuations().empty() || invocation == nullptr) {
    violations.push_back("the invocation never actuated d0");
    return violations;
  }
  const std::string holder = routine::holder_name("r", *invocation);

  // The device group takes the lock back.
  const std::string group = sim.node(0)->kgroups().selector().device_group(c.lost_device).to_string();
  kgroup::GroupReplica* device_leader = leader_of(sim, group);
  if (device_leader == nullptr) {
    violations.push_back(fmt::format("no leader for {}", group));
    return violations;
  }
  proto::DeviceUpdate reclaim;
  reclaim.mutable_unlock()->set_device(c.lost_device);
  reclaim.mutable_unlock()->set_holder(holder);
  reclaim.mutable_unlock()->set_reclaimed(true);
  bool reclaimed = false;
  device_leader->submit(
      kgroup::ClientStateMachine::encode_write(0x5eed0000 + seed, routine::DeviceGroupState::encode(reclaim)),
      [&reclaimed](const kgroup::SubmitResult& result) {
        reclaimed = result.status == kgroup::SubmitStatus::committed;
      });
  sim.run_until(sim.simulator().now() + seconds(60));
  if (!reclaimed) violations.push_back("the reclaim was not committed");

  st = routine_state();
  invocation = st == nullptr ? nullptr : st->invocation(1);
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
  for (const auto& id : c.never_actuated) {
    for (const auto& device : devices) {
      if (device->spec().id == id && !device->actuations().empty()) {
        violations.push_back(fmt::format("{} was actuated after the lock was lost", id));
      }
    }
  }
  for (const auto& device : catalog) {
    kgroup::GroupReplica* leader =
        leader_of(sim, sim.node(0)->kgroups().selector().device_group(device.id).to_string());
    const auto* ds = leader == nullptr ? nullptr : dynamic_cast<const routine::DeviceGroupState*>(
                                                       &leader->state_machine());
    const auto* lock = ds == nullptr ? nullptr : ds->locks().find(device.id);
    if (lock != nullptr && !lock->free()) {
      violations.push_back(fmt::format("{} is still locked by {}", device.id, lock->holder));
    }
  }
  return violations;
}

void sweep(const Case& c) {
  const test_support::SeedRange range = test_support::seed_range("ROUTINE_LOST_LOCK", 1, 4);
  if (range.replaying) core::set_log_level("info", "routine");
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    if (test_support::report_violations("ROUTINE_LOST_LOCK", seed, run(c, seed))) return;
  }
  std::printf("%s: %llu seeds\n", c.name, static_cast<unsigned long long>(range.end() - range.first));
}

TEST(RoutineLostLockSim, AFencedCommandStopsTheInvocation) {
  // No renewal in the run: the leader learns of the loss from the refusal.
  sweep({"fenced", "d1", false, "fenced", {"d1", "d2"}});
}

TEST(RoutineLostLockSim, ALockReportedLostStopsTheInvocationBeforeItsNextCommand) {
  sweep({"renewal answered lost", "d2", true, "taken back", {"d1", "d2"}});
}

}  // namespace
}  // namespace mesh::sim
