#include "core/timer_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace mesh::core {
namespace {

TimePoint at(int64_t us) { return TimePoint(Duration(us)); }

TEST(TimerQueue, FiresInDeadlineThenSchedulingOrder) {
  TimerQueue q;
  std::vector<int> order;
  q.schedule(at(20), [&] { order.push_back(3); });
  q.schedule(at(10), [&] { order.push_back(1); });
  q.schedule(at(10), [&] { order.push_back(2); });
  EXPECT_EQ(q.next_deadline(), at(10));
  EXPECT_EQ(q.run_due(at(15)), 2u);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(q.run_due(at(20)), 1u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, CancelledTimerNeverFires) {
  TimerQueue q;
  bool fired = false;
  const TimerId id = q.schedule(at(5), [&] { fired = true; });
  EXPECT_TRUE(q.cancel(id));
  EXPECT_FALSE(q.cancel(id));
  q.run_due(at(100));
  EXPECT_FALSE(fired);
}

TEST(TimerQueue, CallbackMayScheduleDueTimers) {
  TimerQueue q;
  int runs = 0;
  q.schedule(at(1), [&] {
    ++runs;
    q.schedule(at(1), [&] { ++runs; });
  });
  EXPECT_EQ(q.run_due(at(1)), 2u);
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace mesh::core
