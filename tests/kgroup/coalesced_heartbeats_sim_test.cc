// Heartbeat coalescing (kgroup/heartbeat_coalescer.h) where it matters: many
// groups on the same three nodes, each node leading some of them, so every
// tick a leader node has several groups' heartbeats for each follower node.
// The sweep runs the replica invariants of replica_sim_test.cc (no committed
// update lost or reordered, one leader per term, no stale read, every group
// settles on its best-scored member holding a quorum lease) for every group,
// under leader and member crashes with loss; the counts check that the
// heartbeats did travel together, and that turning coalescing off restores
// one request per group.
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "core/log.h"
#include "core/metrics.h"
#include "seed_sweep.h"

namespace mesh::kgroup::testing {
namespace {

using sim::KgroupWorld;
using std::chrono::milliseconds;

constexpr size_t kGroups = 6;

// kGroups groups of the same three members, the priority order rotated so
// that each member leads kGroups / 3 of them once the mesh settles.
std::vector<GroupConfig> rotated_groups(KgroupWorld& world, uint64_t seed) {
  const auto chosen = hash_select(world.smart_nodes(), GroupTarget{TargetKind::device, "shared"}, seed, 3);
  std::vector<GroupConfig> configs;
  for (size_t g = 0; g < kGroups; ++g) {
    GroupConfig config;
    config.target = GroupTarget{TargetKind::device, "lamp-" + std::to_string(g)};
    for (size_t m = 0; m < chosen.size(); ++m) config.members.push_back(chosen[(g + m) % chosen.size()].id);
    world.add_group(config);
    configs.push_back(config);
  }
  return configs;
}

// Heartbeats carried and requests that carried them, over every live node.
std::pair<double, double> carried_and_carriers(KgroupWorld& world) {
  double carried = 0;
  double carriers = 0;
  for (size_t i = 0; i < world.size(); ++i) {
    if (const core::Metrics* metrics = world.metrics(i)) {
      carried += static_cast<double>(metrics->total("kgroup_heartbeats_carried_total"));
      carriers += static_cast<double>(metrics->total("kgroup_heartbeat_carriers_total"));
    }
  }
  return {carried, carriers};
}

TEST(CoalescedHeartbeats, GroupsOnTheSameNodesShareOneRequestPerTick) {
  core::set_log_level("warn", "kgroup");
  for (const bool coalesce : {true, false}) {
    sim::KgroupWorldOptions options = world_options({5, 3, 0.0});
    options.replica.coalesce_heartbeats = coalesce;
    KgroupWorld world(7, options);
    const auto configs = rotated_groups(world, 7);
    world.boot_all();
    world.run_for(milliseconds(5000));
    for (const GroupConfig& config : configs) {
      GroupReplica* leader = world.serving_leader(config.target.to_string());
      ASSERT_NE(leader, nullptr) << config.target.to_string() << " coalesce=" << coalesce;
      EXPECT_TRUE(leader->can_read()) << config.target.to_string() << " coalesce=" << coalesce;
    }
    const auto [carried, carriers] = carried_and_carriers(world);
    std::printf("coalesce=%d: %.0f heartbeats in %.0f requests\n", coalesce ? 1 : 0, carried, carriers);
    if (coalesce) {
      // Two groups per leader node, so two heartbeats per request: anything
      // near one per request means they no longer travel together.
      EXPECT_GT(carried, 1.8 * carriers) << "carried=" << carried << " carriers=" << carriers;
    } else {
      EXPECT_EQ(carried, 0) << "coalescing is off, yet heartbeats were carried";
    }
  }
}

SeedOutcome run_seed(uint64_t seed, const SimScenario& scenario) {
  KgroupWorld world(seed, world_options(scenario));
  core::Rng rng(sim::mix_seed(seed, 0xc0a1e5ce));
  const auto configs = rotated_groups(world, seed);
  std::vector<size_t> members;
  for (core::NodeId id : configs.front().members) members.push_back(world.index_of(id));

  world.boot_all();
  world.start_client(rng, [&]() -> GroupReplica* {
    const GroupConfig& config = configs[rng.below(configs.size())];
    const auto leader = world.highest_term_leader(members, config);
    return leader ? world.replica(*leader, config) : nullptr;
  });
  crash_members_then_settle(world, rng, members, configs.front(), faults_tolerated(3), scenario.partitions);

  SeedOutcome outcome;
  for (const GroupConfig& config : configs) {
    for (const std::string& failure : world.check_settled(config.target.to_string(), 0, 0, milliseconds(1000))) {
      if (std::find(outcome.failures.begin(), outcome.failures.end(), failure) == outcome.failures.end()) {
        outcome.failures.push_back(config.target.to_string() + ": " + failure);
      }
    }
  }
  const auto [carried, carriers] = carried_and_carriers(world);
  if (carried <= carriers) outcome.failures.push_back("no request carried more than one heartbeat");
  outcome.acked = world.checker().acks().size();
  return outcome;
}

void sweep(const SimScenario& scenario, uint64_t first_seed, uint64_t count) {
  sweep_seeds(scenario, first_seed, count, [&](uint64_t seed) { return run_seed(seed, scenario); });
}

TEST(CoalescedHeartbeatsSim, SixGroupsOnThreeNodesLeaderCrashesLossy) { sweep({7, 3, 0.02}, 7000, 100); }
TEST(CoalescedHeartbeatsSim, SixGroupsOnThreeNodesPartitions) { sweep({7, 3, 0.01, true}, 7100, 100); }

}  // namespace
}  // namespace mesh::kgroup::testing
