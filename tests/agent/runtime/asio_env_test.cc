#include "agent/runtime/asio_env.h"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <chrono>
#include <vector>

namespace mesh::agent {
namespace {

using std::chrono::milliseconds;

TEST(AsioEnvTest, ClockStartsNearZeroAndIsMonotonic) {
  asio::io_context io;
  AsioEnv env(io, 1);
  const core::TimePoint a = env.now();
  const core::TimePoint b = env.now();
  EXPECT_GE(a.time_since_epoch().count(), 0);
  EXPECT_LE(a, b);
}

TEST(AsioEnvTest, OneShotsFireInDeadlineOrderAfterTheirDelay) {
  asio::io_context io;
  AsioEnv env(io, 1);
  std::vector<int> order;
  std::vector<core::Duration> fired_at(3);
  const core::TimePoint start = env.now();
  env.start_timer(milliseconds(6), [&] {
    order.push_back(2);
    fired_at[2] = env.now() - start;
  });
  env.start_timer(milliseconds(2), [&] {
    order.push_back(0);
    fired_at[0] = env.now() - start;
  });
  env.start_timer(milliseconds(4), [&] {
    order.push_back(1);
    fired_at[1] = env.now() - start;
  });
  io.run();  // returns once no timer is left
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_GE(fired_at[0], milliseconds(2));
  EXPECT_GE(fired_at[1], milliseconds(4));
  EXPECT_GE(fired_at[2], milliseconds(6));
  EXPECT_EQ(env.pending_timers(), 0U);
}

TEST(AsioEnvTest, SameDeadlineFiresInScheduleOrderAndNegativeDelayMeansNow) {
  asio::io_context io;
  AsioEnv env(io, 1);
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) env.start_timer(core::Duration(-1000), [&order, i] { order.push_back(i); });
  io.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(AsioEnvTest, CancelledTimersNeverFire) {
  asio::io_context io;
  AsioEnv env(io, 1);
  std::vector<int> fired;
  const core::TimerId first = env.start_timer(milliseconds(1), [&] { fired.push_back(1); });
  env.start_timer(milliseconds(3), [&] { fired.push_back(2); });
  const core::TimerId late = env.start_timer(milliseconds(5), [&] { fired.push_back(3); });
  env.cancel_timer(first);  // the earliest: the asio timer must move to the next deadline
  env.start_timer(milliseconds(2), [&] {
    fired.push_back(4);
    env.cancel_timer(late);  // cancelled from inside a callback
  });
  env.cancel_timer(first);  // twice is harmless
  io.run();
  EXPECT_EQ(fired, (std::vector<int>{4, 2}));
}

TEST(AsioEnvTest, CancellingEverythingLetsRunReturn) {
  asio::io_context io;
  AsioEnv env(io, 1);
  bool fired = false;
  const core::TimerId id = env.start_timer(std::chrono::hours(1), [&] { fired = true; });
  env.cancel_timer(id);
  io.run();  // would block for an hour if the asio timer were still armed
  EXPECT_FALSE(fired);
}

TEST(AsioEnvTest, PeriodicRunsUntilCancelledFromItsCallback) {
  asio::io_context io;
  AsioEnv env(io, 1);
  int runs = 0;
  const core::TimePoint start = env.now();
  core::TimerId id = core::kNoTimer;
  id = env.start_periodic(milliseconds(2), [&] {
    ++runs;
    EXPECT_GE(env.now() - start, milliseconds(2) * runs);
    if (runs == 4) env.cancel_timer(id);
  });
  io.run();
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(env.pending_timers(), 0U);
}

TEST(AsioEnvTest, CallbacksMayScheduleMoreWork) {
  asio::io_context io;
  AsioEnv env(io, 1);
  int depth = 0;
  std::function<void()> step = [&] {
    if (++depth < 5) env.start_timer(milliseconds(1), step);
  };
  env.start_timer(milliseconds(1), step);
  io.run();
  EXPECT_EQ(depth, 5);
}

TEST(AsioEnvTest, DestroyingTheEnvWithPendingTimersIsSafe) {
  asio::io_context io;
  bool fired = false;
  {
    AsioEnv env(io, 1);
    env.start_timer(milliseconds(1), [&] { fired = true; });
  }
  io.run();
  EXPECT_FALSE(fired);
}

TEST(AsioEnvTest, FixedSeedGivesRepeatableRng) {
  asio::io_context io;
  AsioEnv a(io, 42);
  AsioEnv b(io, 42);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.rng().next_u64(), b.rng().next_u64());
  AsioEnv seeded(io);
  AsioEnv other(io);
  EXPECT_NE(seeded.rng().next_u64(), other.rng().next_u64());
}

}  // namespace
}  // namespace mesh::agent
