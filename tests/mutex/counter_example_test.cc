// camera.md Theorem 3 against Theorem 5: under symmetric and under
// asymmetric ignorance, plain Ricart-Agrawala lets two nodes into the
// critical section at once, and Camera on the very same schedule does not.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mutex/camera_world.h"

namespace mesh::mutex::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct RunResult {
  std::vector<std::string> violations;
  uint64_t grants = 0;
  size_t unfinished = 0;
};

// Nodes 0 (p_i, the higher priority: same sequence number, lower id) and 1
// (p_j) both request at t = 0 and hold for a second; node 2 (p_k) knows
// both. `i_knows_j` selects asymmetric (true) or symmetric ignorance.
RunResult three_nodes(Algorithm algorithm, bool i_knows_j, uint64_t seed) {
  WorldOptions wo;
  wo.nodes = 3;
  wo.topology = "line";
  wo.link.delay = milliseconds(5);
  wo.camera.algorithm = algorithm;
  wo.camera.slow_path_enabled = false;  // the fast path alone is under test (Theorem 5)
  CameraWorld world(seed, wo);
  world.set_list(0, i_knows_j ? std::vector<size_t>{1, 2} : std::vector<size_t>{2});
  world.set_list(1, {2});
  world.set_list(2, {0, 1});
  for (size_t node : {size_t{0}, size_t{1}}) {
    CameraWorld::Section s;
    s.node = node;
    s.resource = "pump";
    s.hold = seconds(1);
    world.run_section(s);
  }
  world.simulator().run_until(core::TimePoint(seconds(60)));
  return RunResult{world.violations(), world.grants(), world.unfinished()};
}

TEST(CounterExample, RicartAgrawalaViolatesSafetyUnderSymmetricIgnorance) {
  RunResult ra = three_nodes(Algorithm::ricart_agrawala, false, 1);
  EXPECT_FALSE(ra.violations.empty()) << "plain RA kept safety where Theorem 3 says it cannot";
  RunResult camera = three_nodes(Algorithm::camera, false, 1);
  EXPECT_TRUE(camera.violations.empty()) << camera.violations.front();
  EXPECT_EQ(camera.grants, 2u);
  EXPECT_EQ(camera.unfinished, 0u);
}

TEST(CounterExample, RicartAgrawalaViolatesSafetyUnderAsymmetricIgnorance) {
  RunResult ra = three_nodes(Algorithm::ricart_agrawala, true, 1);
  EXPECT_FALSE(ra.violations.empty()) << "plain RA kept safety where Theorem 3 says it cannot";
  RunResult camera = three_nodes(Algorithm::camera, true, 1);
  EXPECT_TRUE(camera.violations.empty()) << camera.violations.front();
  EXPECT_EQ(camera.grants, 2u);
  EXPECT_EQ(camera.unfinished, 0u);
}

// The same two schedules with delays drawn per seed: RA breaks on some of
// them, Camera on none.
TEST(CounterExample, CameraSafeOnEveryJitteredSchedule) {
  int ra_broken = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    for (bool asym : {false, true}) {
      WorldOptions wo;
      wo.nodes = 3;
      wo.topology = "line";
      wo.link.delay = milliseconds(2);
      wo.link.jitter = milliseconds(20);
      for (Algorithm a : {Algorithm::ricart_agrawala, Algorithm::camera}) {
        wo.camera.algorithm = a;
        wo.camera.slow_path_enabled = false;
        CameraWorld world(seed, wo);
        world.set_list(0, asym ? std::vector<size_t>{1, 2} : std::vector<size_t>{2});
        world.set_list(1, {2});
        world.set_list(2, {0, 1});
        for (size_t node : {size_t{0}, size_t{1}}) {
          CameraWorld::Section s;
          s.node = node;
          s.resource = "pump";
          s.hold = milliseconds(200);
          world.simulator().after(milliseconds(world.simulator().rng().between(0, 10)),
                                  [&world, s] { world.run_section(s); });
        }
        world.simulator().run_until(core::TimePoint(seconds(60)));
        if (a == Algorithm::ricart_agrawala) {
          ra_broken += world.violations().empty() ? 0 : 1;
        } else {
          ASSERT_TRUE(world.violations().empty())
              << "FAILING SEED " << seed << " asym=" << asym << ": " << world.violations().front();
          ASSERT_EQ(world.unfinished(), 0u) << "FAILING SEED " << seed;
        }
      }
    }
  }
  EXPECT_GT(ra_broken, 0);
}

}  // namespace
}  // namespace mesh::mutex::testing
