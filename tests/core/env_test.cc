#include "core/env.h"
#include "tests/support/manual_env.h"

#include <gtest/gtest.h>

#include <vector>

namespace mesh::core {
namespace {

using test_support::ManualEnv;

using std::chrono::milliseconds;

TEST(Env, OneShotFiresOnceAtItsDeadline) {
  ManualEnv env;
  std::vector<TimePoint> fired;
  env.start_timer(milliseconds(10), [&] { fired.push_back(env.now()); });
  env.advance(milliseconds(9));
  EXPECT_TRUE(fired.empty());
  env.advance(milliseconds(100));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0], TimePoint(milliseconds(10)));
}

TEST(Env, PeriodicRepeatsUntilCancelled) {
  ManualEnv env;
  int runs = 0;
  const TimerId id = env.start_periodic(milliseconds(10), [&] { ++runs; });
  env.advance(milliseconds(35));
  EXPECT_EQ(runs, 3);
  env.cancel_timer(id);
  env.advance(milliseconds(100));
  EXPECT_EQ(runs, 3);
}

TEST(Env, PeriodicMayCancelItself) {
  ManualEnv env;
  int runs = 0;
  TimerId id = kNoTimer;
  id = env.start_periodic(milliseconds(1), [&] {
    if (++runs == 2) env.cancel_timer(id);
  });
  env.advance(milliseconds(10));
  EXPECT_EQ(runs, 2);
}

TEST(ScopedTimer, DestructionCancels) {
  ManualEnv env;
  int runs = 0;
  {
    ScopedTimer t(env);
    t.start(milliseconds(5), [&] { ++runs; });
    EXPECT_TRUE(t.active());
  }
  env.advance(milliseconds(10));
  EXPECT_EQ(runs, 0);
}

TEST(ScopedTimer, RestartReplacesAndFiringClearsActive) {
  ManualEnv env;
  int first = 0, second = 0;
  ScopedTimer t(env);
  t.start(milliseconds(5), [&] { ++first; });
  t.start(milliseconds(7), [&] { ++second; });
  env.advance(milliseconds(10));
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  EXPECT_FALSE(t.active());
}

}  // namespace
}  // namespace mesh::core
