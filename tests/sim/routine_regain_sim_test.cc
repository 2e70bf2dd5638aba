// A routine leader that loses its group's quorum, hears a change of its
// trigger device while it leads nothing, and then leads the routine again
// must act on that change (whole agents in MeshSim, random meshes of 7-10
// nodes, k = 3).
//
// The node's DeviceWatcher keeps what its subscriptions told it after the
// routine leader's session ended (the device group's subscription lease
// outlives the session), and tells its listeners only of changes, so a new
// session never heard of a change that came in between: under churn (bench/
// routine_bench.cc, 40 % of the nodes crashed) a routine group that lost its
// leader's quorum for a few seconds while routes healed then never
// triggered. Each seed: settle; the routine group's first member leads it;
// crash its other two members (the leader steps down); set the sensor on and
// wait until the former leader's node has heard it; restart the last member;
// the former leader leads again (it comes first) and must actuate the plug.
// Seeds where the scenario cannot be staged (a crash would partition the
// mesh, the sensor's group would lose its quorum, the former leader never
// heard the change) are skipped and counted. ROUTINE_REGAIN_SEED=n replays one.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "core/rng.h"
#include "routine/emulated_device.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

enum class Result { skipped, triggered, missed };

struct Detail {
  std::string why;
};

Result skip(Detail& detail, std::string why) {
  detail.why = std::move(why);
  return Result::skipped;
}

std::optional<std::pair<size_t, kgroup::GroupReplica*>> serving_leader(MeshSim& sim, const std::string& target) {
  std::optional<std::pair<size_t, kgroup::GroupReplica*>> best;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* r = node->kgroups().host().latest(target);
    if (r == nullptr || !r->serving()) continue;
    if (!best || std::make_pair(r->config().epoch, r->config().generation) >
                     std::make_pair(best->second->config().epoch, best->second->config().generation)) {
      best = std::make_pair(i, r);
    }
  }
  return best;
}

size_t index_of(MeshSim& sim, core::NodeId id) {
  for (size_t i = 0; i < sim.size(); ++i) {
    if (sim.id_of(i) == id) return i;
  }
  return sim.size();
}

Result run_seed(uint64_t seed, Detail& detail) {
  core::Rng rng(seed * 7919 + 3);
  std::vector<std::unique_ptr<routine::EmulatedDevice>> devices;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  std::vector<routine::DeviceSpec> catalog;
  const auto add = [&](const std::string& id, routine::DeviceKind kind, routine::Attributes initial) {
    routine::DeviceSpec spec;
    spec.id = id;
    spec.kind = kind;
    spec.location = {static_cast<double>(rng.below(60)), static_cast<double>(rng.below(60)), 0};
    spec.driver = "emulated://" + id;
    catalog.push_back(spec);
    devices.push_back(std::make_unique<routine::EmulatedDevice>(spec, std::move(initial)));
    return devices.back().get();
  };
  routine::EmulatedDevice* sensor = add("motion", routine::DeviceKind::motion_sensor, {{"motion", false}});
  routine::EmulatedDevice* plug = add("plug", routine::DeviceKind::plug, {{"power", false}});
  routine::RoutineSpec spec;
  spec.id = "r0";
  spec.trigger_text = "motion.motion == on";
  spec.trigger = routine::build_trigger(spec.trigger_text, "", {}).value();
  spec.min_retrigger = seconds(1);
  routine::RoutineCommand command;
  command.device = "plug";
  command.values = {{"power", true}};
  spec.commands.push_back(command);

  Scenario scenario;
  scenario.source = "routine-regain";
  scenario.topology.kind = "random";
  scenario.topology.nodes = static_cast<int>(rng.between(7, 10));
  scenario.topology.seed = seed;
  scenario.link.delay_ms = 2;
  scenario.run.duration_s = 600;
  MeshSim::Options options;
  options.configure = [&](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 1;
    config.devices.catalog = catalog;
    config.devices.routines = {spec};
    config.devices.catalog_digest = "regain";
    config.devices.leaders.poll_interval = milliseconds(500);
  };
  options.drivers = [&](size_t, core::Env& env) {
    factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices) factories.back()->add(*device);
    return factories.back().get();
  };
  MeshSim sim(scenario, seed, options);
  sim.run_until(core::TimePoint(seconds(40)));

  const std::string target = "routine:r0";
  const auto leading = serving_leader(sim, target);
  if (!leading) return skip(detail, "routine group not serving after settling");
  const auto members = leading->second->config().members;
  if (members.size() != 3 || members.front() != sim.id_of(leading->first)) {
    return skip(detail, "leader is not the group's first member");
  }
  const size_t leader = leading->first;
  const size_t f = index_of(sim, members[1]);
  const size_t g = index_of(sim, members[2]);
  const std::set<size_t> down = {f, g};
  if (!sim.topology().connected_without(down)) return skip(detail, "crash would partition");
  // The sensor's group must keep a quorum without f and g.
  agent::Node* any = sim.node(leader);
  const std::string sensor_group = any->kgroups().selector().device_group("motion").to_string();
  const auto sensor_leading = serving_leader(sim, sensor_group);
  if (!sensor_leading) return skip(detail, "sensor group not serving");
  size_t lost = 0;
  for (auto m : sensor_leading->second->config().members) lost += (m == members[1] || m == members[2]) ? 1 : 0;
  if (lost > 1) return skip(detail, "sensor group would lose its quorum");

  // The routine group loses its quorum: its leader steps down.
  sim.crash(f);
  sim.crash(g);
  sim.run_until(sim.simulator().now() + seconds(2));
  if (serving_leader(sim, target)) return skip(detail, "routine group still serving");

  // The trigger device changes while nobody leads the routine; the former
  // leader's node still hears of it (its subscription has not lapsed).
  const core::TimePoint changed = sim.simulator().now();
  sensor->set_state({{"motion", true}});
  bool heard = false;
  for (int step = 0; step < 100 && !heard; ++step) {
    sim.run_until(sim.simulator().now() + milliseconds(100));
    const auto& view = sim.node(leader)->device_watcher().view();
    const auto it = view.find("motion");
    heard = it != view.end() && std::get<bool>(it->second.record.attributes.at("motion"));
  }
  if (!heard) return skip(detail, "former leader never heard the change");
  if (serving_leader(sim, target)) return skip(detail, "routine group serving again too early");

  // One member returns: the former leader (first in priority) leads again.
  sim.restart(g);
  const core::TimePoint give_up = sim.simulator().now() + seconds(60);
  while (sim.simulator().now() < give_up) {
    sim.run_until(sim.simulator().now() + milliseconds(200));
    for (const auto& a : plug->actuations()) {
      if (a.at >= changed && a.command_id.rfind("r0#", 0) == 0) return Result::triggered;
    }
  }
  const auto again = serving_leader(sim, target);
  if (!again) return skip(detail, "routine group never served again");
  detail.why = fmt::format("node {} leads the routine again (group generation {}) but never acted on the change",
                           again->first, again->second->config().generation);
  return Result::missed;
}

TEST(RoutineRegainSim, ALeaderThatRegainsItsGroupActsOnAChangeItHeardMeanwhile) {
  const auto range = test_support::seed_range("ROUTINE_REGAIN", 1, 20);
  size_t staged = 0;
  size_t skipped = 0;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    Detail detail;
    switch (run_seed(seed, detail)) {
      case Result::skipped:
        ++skipped;
        if (range.replaying) {
          std::printf("seed %llu skipped: %s\n", static_cast<unsigned long long>(seed), detail.why.c_str());
        }
        break;
      case Result::triggered:
        ++staged;
        break;
      case Result::missed:
        ++staged;
        if (test_support::report_violations("ROUTINE_REGAIN", seed, {detail.why})) return;
        break;
    }
  }
  std::printf("staged=%zu skipped=%zu\n", staged, skipped);
  if (!range.replaying) {
    EXPECT_GE(staged, 5u) << "too few seeds stage the scenario to show anything";
  }
}

}  // namespace
}  // namespace mesh::sim
