// Simulation of one k-group hosting a counter log under leader crashes at
// random points and up to f simultaneous member crashes, with message loss.
// Invariants (sim/kgroup_checker.h, KgroupWorld::check_settled): no
// committed update lost or reordered; every member applies the same
// history; at most one leader per term; no stale read; once membership
// settles, one leader (the best-scored member) is followed by every member,
// commits and holds a quorum lease.
#include <gtest/gtest.h>

#include "seed_sweep.h"

namespace mesh::kgroup::testing {
namespace {

using sim::KgroupWorld;
using std::chrono::milliseconds;

SeedOutcome run_seed(uint64_t seed, const SimScenario& scenario) {
  KgroupWorld world(seed, world_options(scenario));
  core::Rng rng(sim::mix_seed(seed, 0xc1a05));

  GroupConfig config;
  config.target = GroupTarget{TargetKind::device, "lamp-" + std::to_string(seed % 7)};
  config.epoch = 0;
  for (const auto& m : hash_select(world.smart_nodes(), config.target, 0, scenario.k)) config.members.push_back(m.id);
  world.add_group(config);
  const std::string target = config.target.to_string();
  const size_t f = faults_tolerated(scenario.k);
  std::vector<size_t> members;
  for (core::NodeId id : config.members) members.push_back(world.index_of(id));

  world.boot_all();

  auto current_leader = [&] { return world.highest_term_leader(members, config); };
  world.start_client(rng, [&]() -> GroupReplica* {
    const auto leader = current_leader();
    return leader ? world.replica(*leader, config) : nullptr;
  });

  // Crashes: the leader at random points, random members, f at once.
  crash_members_then_settle(world, rng, members, config, f, scenario.partitions);

  SeedOutcome outcome;
  outcome.failures = world.check_settled(target, 0, 0, milliseconds(1000));
  GroupReplica* leader = world.replica(members.front(), config);
  if (outcome.failures.empty() && (leader == nullptr || !leader->can_read())) {
    outcome.failures.push_back("the settled leader holds no quorum lease");
  }
  outcome.acked = world.checker().acks().size();
  return outcome;
}

void sweep(const SimScenario& scenario, uint64_t first_seed, uint64_t count) {
  sweep_seeds(scenario, first_seed, count, [&](uint64_t seed) { return run_seed(seed, scenario); });
}

TEST(ReplicaSim, K3LeaderCrashes) { sweep({7, 3, 0.0}, 0, 150); }
TEST(ReplicaSim, K3LeaderCrashesLossy) { sweep({7, 3, 0.02}, 1000, 150); }
TEST(ReplicaSim, K5TwoCrashes) { sweep({9, 5, 0.0}, 2000, 120); }
TEST(ReplicaSim, K5TwoCrashesLossy) { sweep({9, 5, 0.02}, 3000, 120); }
TEST(ReplicaSim, K3Partitions) { sweep({7, 3, 0.01, true}, 4000, 150); }
TEST(ReplicaSim, K5Partitions) { sweep({9, 5, 0.01, true}, 5000, 120); }

}  // namespace
}  // namespace mesh::kgroup::testing
