// The seeds a simulation sweep runs, and the line that reports a failing
// one. Each sweep reads its own pair of environment variables, so a failure
// printed by CI replays alone:
//   <PREFIX>_SEED=n        run seed n only (sweeps turn their layer's debug log on)
//   <PREFIX>_SEED_SCALE=n  run n times as many seeds (soaks outside CI)
// and, for every sweep on whole agents (sim/mesh_sim.h):
//   MESH_SIM_SLOW_DISKS=1  disks that take 2-40 ms per commit and lose what
//                          was not yet durable at a crash
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace mesh::test_support {

struct SeedRange {
  uint64_t first = 0;
  uint64_t count = 0;
  bool replaying = false;  // one seed named by <PREFIX>_SEED
  uint64_t end() const { return first + count; }
};

inline SeedRange seed_range(const std::string& prefix, uint64_t first, uint64_t count) {
  if (const char* one = std::getenv((prefix + "_SEED").c_str())) return {std::strtoull(one, nullptr, 10), 1, true};
  if (const char* scale = std::getenv((prefix + "_SEED_SCALE").c_str())) {
    count *= static_cast<uint64_t>(std::max(1, std::atoi(scale)));
  }
  return {first, count, false};
}

// Opens a failing seed's report with the command line that replays it.
inline std::string failing_seed(const std::string& prefix, uint64_t seed) {
  return "FAILING SEED " + std::to_string(seed) + " (replay: " + prefix + "_SEED=" + std::to_string(seed) + ")\n";
}

// Fails the test with a failing seed's violations, one per line, under its
// replay line. Returns true when the sweep should stop: after the first
// failing seed, unless <PREFIX>_ALL is set (then every failing seed is listed).
inline bool report_violations(const std::string& prefix, uint64_t seed, const std::vector<std::string>& violations) {
  if (violations.empty()) return false;
  std::string message = failing_seed(prefix, seed);
  for (const auto& v : violations) message += "  " + v + "\n";
  ADD_FAILURE() << message;
  return std::getenv((prefix + "_ALL").c_str()) == nullptr;
}

}  // namespace mesh::test_support
