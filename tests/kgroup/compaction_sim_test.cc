// Simulation of log compaction: one k-group under a steady stream of
// updates, leader and member crashes at random points (up to f at once),
// message loss, partitions, and then one follower down for long enough that its leader
// compacts away every entry it missed, restarted. Checks, for every seed:
//  - storage stays bounded: sampled every 100 ms on every member, it holds at
//    most snapshot_after_entries applied log entries; once settled, its
//    group's keys are at most that many entries plus meta, config and
//    snapshot;
//  - no acknowledged update lost and every member ends with the same state
//    (KgroupWorld::check_settled, the checker's invariants throughout);
//  - the long-down follower caught up through a snapshot it received.
#include <charconv>

#include <gtest/gtest.h>

#include "seed_sweep.h"

namespace mesh::kgroup::testing {
namespace {

using sim::KgroupWorld;
using std::chrono::milliseconds;

constexpr size_t kSnapshotAfter = 16;
// Besides log entries a group holds its meta, its config and its snapshot.
constexpr size_t kOtherKeys = 3;

struct GroupStorage {
  size_t keys = 0;             // every key of the group
  size_t entries = 0;          // log entries
  size_t applied_entries = 0;  // log entries at or below `applied`
  size_t bytes = 0;            // keys and values of the group
};

GroupStorage group_storage(const core::MemoryStorage& storage, const std::string& target, uint64_t applied) {
  GroupStorage out;
  const std::string prefix = ReplicatedLog::key_prefix(target, 0, 0);
  const std::string log_prefix = prefix + "log/";
  for (const std::string& key : storage.keys(prefix)) {
    ++out.keys;
    out.bytes += key.size() + storage.get(key).value_or("").size();
    if (!key.starts_with(log_prefix)) continue;
    ++out.entries;
    uint64_t seq = 0;
    const std::string_view digits = std::string_view(key).substr(log_prefix.size());
    std::from_chars(digits.data(), digits.data() + digits.size(), seq);
    if (seq <= applied) ++out.applied_entries;
  }
  return out;
}

struct LaggardStats {
  size_t must_install = 0;  // seeds whose long-down follower was behind every compaction
  size_t installed = 0;     // snapshots those followers installed
};

SeedOutcome run_seed(uint64_t seed, const SimScenario& scenario, LaggardStats& stats) {
  sim::KgroupWorldOptions options = world_options(scenario);
  options.replica.snapshot_after_entries = kSnapshotAfter;
  KgroupWorld world(seed, options);
  core::Rng rng(sim::mix_seed(seed, 0xc0a1e5ce));

  GroupConfig config;
  config.target = GroupTarget{TargetKind::device, "lamp-" + std::to_string(seed % 7)};
  for (const auto& m : hash_select(world.smart_nodes(), config.target, 0, scenario.k)) config.members.push_back(m.id);
  world.add_group(config);
  const std::string target = config.target.to_string();
  const size_t f = faults_tolerated(scenario.k);
  std::vector<size_t> members;
  for (core::NodeId id : config.members) members.push_back(world.index_of(id));

  world.boot_all();

  std::vector<std::string> failures;
  auto current_leader = [&] { return world.highest_term_leader(members, config); };
  world.start_client(rng, [&]() -> GroupReplica* {
    const auto leader = current_leader();
    return leader ? world.replica(*leader, config) : nullptr;
  });

  // The bound, sampled at every member that is up.
  bool sampling = true;
  std::function<void()> sample = [&] {
    if (!sampling) return;
    for (size_t m : members) {
      GroupReplica* r = world.replica(m, config);
      if (r == nullptr) continue;
      const GroupStorage held = group_storage(world.storage(m), target, r->applied());
      if (held.applied_entries > kSnapshotAfter && failures.size() < 3) {
        failures.push_back(
            "n" + std::to_string(m) + " holds " + std::to_string(held.applied_entries) +
            " applied log entries (applied " + std::to_string(r->applied()) + ", " + std::to_string(held.bytes) +
            " bytes) at " +
            std::to_string(static_cast<int64_t>(core::to_millis(world.simulator().now().time_since_epoch()))) +
            " ms, more than snapshot_after_entries = " + std::to_string(kSnapshotAfter));
      }
    }
    world.simulator().after(milliseconds(100), sample);
  };
  world.simulator().after(milliseconds(100), sample);

  // Crashes: the leader at random points, random members, f at once.
  const core::TimePoint chaos_end = world.simulator().now() + milliseconds(8000);
  world.simulator().after(milliseconds(1000), [&] {
    world.crash_members_until(chaos_end, rng, members, config, f, scenario.partitions);
  });
  world.run_for(milliseconds(11000));

  // Everyone back: one follower goes down for long while the group commits
  // many times snapshot_after_entries, then restarts behind every
  // compaction.
  world.settle();
  world.run_for(milliseconds(3000));
  std::optional<size_t> laggard;
  const auto leader_now = current_leader();
  for (size_t m : members) {
    if (leader_now && m != *leader_now) laggard = m;
  }
  // Whether the laggard must catch up through a snapshot: every other member
  // compacted past what it had applied, as last seen while it was down (the
  // group may also have written too little meanwhile, e.g. while electing).
  uint64_t laggard_applied = 0;
  uint64_t others_compacted = 0;
  std::function<void()> watch_laggard = [&] {
    if (world.up(*laggard)) return;
    uint64_t lowest = UINT64_MAX;
    for (size_t m : members) {
      if (GroupReplica* r = world.replica(m, config)) lowest = std::min(lowest, r->snapshot_seq());
    }
    others_compacted = lowest == UINT64_MAX ? 0 : lowest;
    world.simulator().after(milliseconds(50), watch_laggard);
  };
  if (!laggard) {
    failures.push_back("no leader to lag behind after settling");
  } else {
    laggard_applied = world.replica(*laggard, config)->applied();
    sim::CrashTiming long_down;
    long_down.down_min = milliseconds(6000);
    long_down.down_spread_ms = 1000;
    world.crash_for_a_while(*laggard, rng, long_down);
    watch_laggard();
  }
  world.run_for(milliseconds(8000));
  world.settle();
  world.run_for(milliseconds(4000));
  world.stop_client();
  world.run_for(milliseconds(1000));
  sampling = false;

  SeedOutcome outcome;
  outcome.failures = world.check_settled(target, 0, 0, milliseconds(2000));
  outcome.failures.insert(outcome.failures.end(), failures.begin(), failures.end());
  for (size_t m : members) {
    GroupReplica* r = world.replica(m, config);
    const GroupStorage held = group_storage(world.storage(m), target, r != nullptr ? r->applied() : 0);
    if (held.keys > kSnapshotAfter + kOtherKeys) {
      outcome.failures.push_back("settled n" + std::to_string(m) + " holds " + std::to_string(held.keys) + " keys (" +
                                 std::to_string(held.entries) + " log entries, " + std::to_string(held.bytes) +
                                 " bytes) for its group, more than " + std::to_string(kSnapshotAfter + kOtherKeys));
    }
  }
  if (laggard && others_compacted > laggard_applied) {
    ++stats.must_install;
    const core::Metrics* metrics = world.metrics(*laggard);
    const uint64_t installed = metrics != nullptr ? metrics->total("kgroup_snapshots_installed_total") : 0;
    stats.installed += installed;
    if (installed == 0) {
      outcome.failures.push_back("the long-down follower n" + std::to_string(*laggard) + " (applied " +
                                 std::to_string(laggard_applied) + ", every other member compacted through " +
                                 std::to_string(others_compacted) + ") caught up without receiving a snapshot");
    }
  }
  outcome.acked = world.checker().acks().size();
  return outcome;
}

void sweep(const SimScenario& scenario, uint64_t first_seed, uint64_t count) {
  LaggardStats stats;
  sweep_seeds(scenario, first_seed, count, [&](uint64_t seed) { return run_seed(seed, scenario, stats); });
  std::printf(
      "snapshot_after_entries=%zu seeds whose long-down follower had to catch up by snapshot=%zu "
      "(snapshots it installed=%zu)\n",
      kSnapshotAfter, stats.must_install, stats.installed);
  // Otherwise the sweep never exercised the transfer it is here for.
  if (test_support::seed_range("KGROUP", first_seed, count).count > 1) {
    EXPECT_GT(stats.must_install, 0u);
  }
}

TEST(CompactionSim, K3BoundedStorageUnderCrashes) { sweep({7, 3, 0.0}, 0, 40); }
TEST(CompactionSim, K3BoundedStorageUnderCrashesLossy) { sweep({7, 3, 0.02}, 1000, 40); }
TEST(CompactionSim, K5BoundedStorageUnderCrashesLossy) { sweep({9, 5, 0.02}, 2000, 30); }
TEST(CompactionSim, K3BoundedStorageUnderPartitions) { sweep({7, 3, 0.01, true}, 3000, 40); }

}  // namespace
}  // namespace mesh::kgroup::testing
