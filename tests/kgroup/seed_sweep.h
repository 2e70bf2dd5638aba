// The seed sweep shared by the kgroup simulation tests: a scenario, what one
// seed's run found, and the loop that runs many seeds and reports each
// failing seed with the environment that replays it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/log.h"
#include "sim/kgroup_world.h"
#include "tests/support/seed_range.h"

namespace mesh::kgroup::testing {

struct SimScenario {
  size_t nodes;
  size_t k;
  double loss;
  bool partitions = false;  // also split the mesh in two for a while, views unchanged
};

inline sim::KgroupWorldOptions world_options(const SimScenario& scenario) {
  sim::KgroupWorldOptions options;
  options.nodes = scenario.nodes;
  options.k = scenario.k;
  options.hop_loss = scenario.loss;
  return options;
}

struct SeedOutcome {
  std::vector<std::string> failures;  // broken invariants, empty if none
  size_t acked = 0;                   // acknowledged client updates
  size_t migrations = 0;              // epochs and generations the target went through
};

// The chaos both replica sweeps run once the client writes: from 1 s to 13 s
// the members of `config` crash (and, with `partitions`, the mesh splits)
// as crash_members_until draws it, never more than f at once; then
// membership settles, the client writes 6 s more and stops, and 1 s passes.
inline void crash_members_then_settle(sim::KgroupWorld& world, core::Rng& rng, const std::vector<size_t>& members,
                                      const GroupConfig& config, size_t f, bool partitions) {
  using std::chrono::milliseconds;
  const core::TimePoint chaos_end = world.simulator().now() + milliseconds(12000);
  world.simulator().after(milliseconds(1000), [&world, &rng, members, config, f, partitions, chaos_end] {
    world.crash_members_until(chaos_end, rng, members, config, f, partitions);
  });
  world.run_for(milliseconds(13000));
  world.settle();
  world.run_for(milliseconds(6000));
  world.stop_client();
  world.run_for(milliseconds(1000));
}

// Runs `run` for `count` seeds from `first_seed` and prints the totals.
// KGROUP_SEED / KGROUP_SEED_SCALE: see tests/support/seed_range.h;
// KGROUP_LOG=level shows the kgroup log. The sweep stops after five failing
// seeds. `check` adds a scenario's own per-seed checks.
inline void sweep_seeds(const SimScenario& scenario, uint64_t first_seed, uint64_t count,
                        const std::function<SeedOutcome(uint64_t seed)>& run,
                        const std::function<void(uint64_t seed, const SeedOutcome&)>& check = {}) {
  const test_support::SeedRange range = test_support::seed_range("KGROUP", first_seed, count);
  core::set_log_level(std::getenv("KGROUP_LOG") ? std::getenv("KGROUP_LOG") : "warn", "kgroup");
  size_t acked = 0;
  size_t migrations = 0;
  size_t failed = 0;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const SeedOutcome outcome = run(seed);
    acked += outcome.acked;
    migrations += outcome.migrations;
    if (!outcome.failures.empty()) {
      std::string all;
      for (const auto& f : outcome.failures) all += "\n  " + f;
      ADD_FAILURE() << test_support::failing_seed("KGROUP", seed) << all;
      if (++failed >= 5) return;
    }
    if (check) check(seed, outcome);
    if (outcome.acked == 0) ADD_FAILURE() << "seed " << seed << ": no update was ever acknowledged";
  }
  std::printf("k=%zu nodes=%zu loss=%.2f partitions=%d seeds=%llu acknowledged=%zu migrations=%zu\n", scenario.k,
              scenario.nodes, scenario.loss, scenario.partitions ? 1 : 0, static_cast<unsigned long long>(range.count),
              acked, migrations);
}

}  // namespace mesh::kgroup::testing
