// The operation latencies each member records (kgroup/replica_metrics.h),
// on a simulated mesh: a client writes to whichever group of the target
// serves, groups migrate every 2.5 s, and the serving leader is crashed once
// mid-run. Every seed's metrics must show a quorum commit, a seal and a
// state transfer, and respect what causality implies in virtual time: a
// commit needs a round trip, an election ends after the last append from
// the lost leader, and a state transfer includes its pull. An election after
// losing a leader is recorded only where the winner had followed that leader
// (the crashed leader's other follower may lose, having never followed it
// when it refused a competing claim), so the sweep as a whole must record
// them. No wall-clock timing is asserted.
#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "seed_sweep.h"

namespace mesh::kgroup::testing {
namespace {

using sim::KgroupWorld;
using std::chrono::milliseconds;

// One series summed over every live node.
struct Merged {
  uint64_t count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = 0.0;
};

std::map<std::string, Merged> merged_histograms(KgroupWorld& world) {
  std::map<std::string, Merged> out;
  for (size_t i = 0; i < world.size(); ++i) {
    const core::Metrics* metrics = world.metrics(i);
    if (metrics == nullptr) continue;
    for (const auto& row : metrics->histograms()) {
      if (row.histogram->count() == 0) continue;
      Merged& m = out[row.series];
      m.count += row.histogram->count();
      m.min = std::min(m.min, row.histogram->min());
      m.max = std::max(m.max, row.histogram->max());
    }
  }
  return out;
}

SeedOutcome run_seed(uint64_t seed, const SimScenario& scenario, bool& leader_lost_recorded) {
  sim::KgroupWorldOptions options = world_options(scenario);
  options.epoch_length = milliseconds(2500);
  KgroupWorld world(seed, options);
  core::Rng rng(sim::mix_seed(seed, 0x7ab1e4));

  GroupConfig config;
  config.target = GroupTarget{TargetKind::device, "meter-" + std::to_string(seed % 5)};
  config.epoch = 0;
  for (const auto& m : hash_select(world.smart_nodes(), config.target, 0, scenario.k)) config.members.push_back(m.id);
  world.add_group(config);
  const std::string target = config.target.to_string();
  world.boot_all();
  world.start_client(rng, [&] { return world.serving_leader(target); });

  SeedOutcome outcome;
  // Crash the serving leader once, after a few commits; retry until one serves.
  bool crashed = false;
  std::function<void()> crash_leader = [&] {
    if (GroupReplica* leader = world.serving_leader(target)) {
      world.crash_for_a_while(world.index_of(leader->leader()), rng);
      crashed = true;
      return;
    }
    world.simulator().after(milliseconds(100), crash_leader);
  };
  world.simulator().after(milliseconds(1500 + rng.below(1000)), crash_leader);
  world.run_for(milliseconds(11000));
  world.stop_client();
  world.settle();
  world.run_for(milliseconds(2000));

  outcome.failures = world.checker().failures();
  outcome.acked = world.checker().acks().size();
  if (const auto newest = world.newest(target)) outcome.migrations = newest->epoch() + newest->generation();
  if (!crashed) outcome.failures.push_back("no leader served to be crashed");

  const auto h = merged_histograms(world);
  auto get = [&](const std::string& series) { return h.count(series) ? h.at(series) : Merged{}; };
  auto need = [&](const std::string& series) {
    if (get(series).count == 0) outcome.failures.push_back(series + " recorded nothing");
  };
  need("kgroup_quorum_commit_ms");
  leader_lost_recorded = get("kgroup_election_ms{trigger=leader_lost}").count > 0;
  need("kgroup_seal_commit_ms");
  need("kgroup_state_transfer_ms");
  need("kgroup_state_pull_ms");

  const Merged quorum = get("kgroup_quorum_commit_ms");
  // Every record is a committed submission; the crashed leader's records went with it.
  if (quorum.count > outcome.acked) {
    outcome.failures.push_back("quorum commits recorded " + std::to_string(quorum.count) + " > acknowledged " +
                               std::to_string(outcome.acked));
  }
  // A commit needs another member's acknowledgement: a round trip over at least one hop.
  if (quorum.count > 0 && !(quorum.min > 0.0)) outcome.failures.push_back("a quorum commit took no time");
  for (const std::string trigger : {"leader_lost", "preempt"}) {
    const Merged election = get("kgroup_election_ms{trigger=" + trigger + "}");
    const Merged gap = get("kgroup_leader_gap_ms{trigger=" + trigger + "}");
    // Every such election has its gap, which began no later than the election.
    if (election.count != gap.count) {
      outcome.failures.push_back(trigger + ": " + std::to_string(election.count) + " elections but " +
                                 std::to_string(gap.count) + " leader gaps");
    } else if (election.count > 0 && (gap.min < election.min || gap.max < election.max)) {
      outcome.failures.push_back(trigger + ": a leader gap shorter than its election");
    }
  }
  const Merged transfer = get("kgroup_state_transfer_ms");
  const Merged pull = get("kgroup_state_pull_ms");
  if (transfer.count > 0 && pull.count > 0 && (transfer.max < pull.max || !(pull.min > 0.0))) {
    outcome.failures.push_back("a state transfer shorter than its pull, or a pull that took no time");
  }
  return outcome;
}

TEST(ReplicaMetricsSim, EveryOperationRecordedAndCausal) {
  const SimScenario scenario{7, 3, 0.0};
  size_t seeds = 0;
  size_t with_failover = 0;
  sweep_seeds(scenario, 31000, 20, [&](uint64_t seed) {
    bool leader_lost = false;
    SeedOutcome outcome = run_seed(seed, scenario, leader_lost);
    ++seeds;
    with_failover += leader_lost ? 1 : 0;
    return outcome;
  });
  std::printf("seeds with an election after a leader loss recorded: %zu of %zu\n", with_failover, seeds);
  EXPECT_GT(with_failover, 0u) << "no seed recorded an election after losing its leader";
}

}  // namespace
}  // namespace mesh::kgroup::testing
