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

  auto down_members = [&] {
    size_t n = 0;
    for (size_t m : members) n += world.up(m) ? 0 : 1;
    return n;
  };
  // The member that believes it leads with the highest term.
  auto current_leader = [&]() -> std::optional<size_t> {
    std::optional<size_t> best;
    uint64_t best_term = 0;
    for (size_t m : members) {
      GroupReplica* r = world.replica(m, config);
      if (r != nullptr && r->role() == Role::leader && r->leader_term() >= best_term) {
        best = m;
        best_term = r->leader_term();
      }
    }
    return best;
  };
  world.start_client(rng, [&]() -> GroupReplica* {
    const auto leader = current_leader();
    return leader ? world.replica(*leader, config) : nullptr;
  });

  // Crashes: the leader at random points, random members, f at once.
  const core::TimePoint chaos_end = world.simulator().now() + milliseconds(12000);
  std::function<void()> chaos = [&] {
    if (world.simulator().now() >= chaos_end) return;
    const uint64_t action = rng.below(10);
    if (scenario.partitions && rng.below(3) == 0) {
      world.partition_for_a_while(rng);
    } else if (action < 5) {
      if (auto leader = current_leader(); leader && down_members() < f) world.crash_for_a_while(*leader, rng);
    } else if (action < 8) {
      const size_t m = members[rng.below(members.size())];
      if (world.up(m) && down_members() < f) world.crash_for_a_while(m, rng);
    } else if (down_members() == 0) {
      std::vector<size_t> shuffled = members;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      for (size_t i = 0; i < f; ++i) world.crash_for_a_while(shuffled[i], rng);
    }
    world.simulator().after(milliseconds(300 + rng.below(1500)), chaos);
  };
  world.simulator().after(milliseconds(1000), chaos);

  world.run_for(milliseconds(13000));
  world.settle();
  world.run_for(milliseconds(6000));
  world.stop_client();
  world.run_for(milliseconds(1000));

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
