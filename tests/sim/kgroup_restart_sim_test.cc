// Every member of a group crashes and all of them come back at once (a
// power cut of one room; bench/routine_bench.cc's churn draws it too): the
// group must keep k members (whole agents in MeshSim, random meshes of 8-12
// nodes, k = 3, LSH, one device per cluster).
//
// The first member to lead again does so with a view that has heard of
// almost nobody yet. It counted every member it had not heard of as failed
// and re-selected from that view: a successor of one member (itself), which
// tolerates no failure and, with no writes, never grew back (re-selection
// runs on failures and commits). Each seed: settle; crash the three members
// of device p0's group; 3-40 s later restart them together; 30 s later the
// newest instance of the group must have three members. Seeds where the
// crash would partition the mesh are skipped. KGROUP_RESTART_SEED=n replays one.
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
#include "sim/mesh_sim.h"
#include "sim/scenario.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

enum class Result { skipped, kept, shrunk };

std::optional<kgroup::GroupConfig> newest(MeshSim& sim, const std::string& target) {
  std::optional<kgroup::GroupConfig> out;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* r = node->kgroups().host().latest(target);
    if (r == nullptr) continue;
    const auto& c = r->config();
    if (!out || std::make_pair(c.epoch, c.generation) > std::make_pair(out->epoch, out->generation)) out = c;
  }
  return out;
}

Result run_seed(uint64_t seed, std::string& why) {
  core::Rng rng(seed * 6007 + 11);
  std::vector<std::unique_ptr<routine::EmulatedDevice>> devices;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  std::vector<routine::DeviceSpec> catalog;
  for (int i = 0; i < 4; ++i) {
    routine::DeviceSpec spec;
    spec.id = fmt::format("p{}", i);
    spec.kind = routine::DeviceKind::plug;
    spec.location = {static_cast<double>(rng.below(60)), static_cast<double>(rng.below(60)), 0};
    spec.driver = "emulated://" + spec.id;
    catalog.push_back(spec);
    devices.push_back(std::make_unique<routine::EmulatedDevice>(spec, routine::Attributes{{"power", false}}));
  }
  Scenario scenario;
  scenario.source = "kgroup-shrink";
  scenario.topology.kind = "random";
  scenario.topology.nodes = static_cast<int>(rng.between(8, 12));
  scenario.topology.seed = seed;
  scenario.link.delay_ms = 2;
  scenario.run.duration_s = 600;
  MeshSim::Options options;
  options.configure = [&](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 1;
    config.devices.catalog = catalog;
    config.devices.catalog_digest = "shrink";
  };
  options.drivers = [&](size_t, core::Env& env) {
    factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices) factories.back()->add(*device);
    return factories.back().get();
  };
  MeshSim sim(scenario, seed, options);
  sim.run_until(core::TimePoint(seconds(40)));
  agent::Node* any = nullptr;
  for (size_t i = 0; i < sim.size() && any == nullptr; ++i) any = sim.node(i);
  const std::string target = any->kgroups().selector().device_group("p0").to_string();
  const auto before = newest(sim, target);
  if (!before || before->members.size() != 3) {
    why = "group not formed with 3 members";
    return Result::skipped;
  }
  std::set<size_t> down;
  for (auto id : before->members) {
    for (size_t i = 0; i < sim.size(); ++i) {
      if (sim.id_of(i) == id) down.insert(i);
    }
  }
  if (!sim.topology().connected_without(down)) {
    why = "crash would partition";
    return Result::skipped;
  }
  for (size_t i : down) sim.crash(i);
  sim.run_until(sim.simulator().now() + milliseconds(rng.between(3000, 40000)));
  for (size_t i : down) sim.restart(i);
  sim.run_until(sim.simulator().now() + seconds(30));
  const auto after = newest(sim, target);
  if (!after) {
    why = "no group";
    return Result::skipped;
  }
  why = fmt::format("e{}g{} -> e{}g{} with {} members", before->epoch, before->generation, after->epoch,
                    after->generation, after->members.size());
  return after->members.size() < 3 ? Result::shrunk : Result::kept;
}

TEST(KgroupRestartSim, AGroupWhoseMembersAllRestartKeepsItsMembers) {
  const auto range = test_support::seed_range("KGROUP_RESTART", 1, 20);
  size_t staged = 0;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    std::string why;
    const Result result = run_seed(seed, why);
    if (range.replaying) std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed), why.c_str());
    if (result == Result::skipped) continue;
    ++staged;
    if (result == Result::shrunk && test_support::report_violations("KGROUP_RESTART", seed, {"shrunk: " + why})) {
      return;
    }
  }
  std::printf("staged=%zu\n", staged);
  if (!range.replaying) {
    EXPECT_GE(staged, 5u) << "too few seeds stage the scenario to show anything";
  }
}

}  // namespace
}  // namespace mesh::sim
