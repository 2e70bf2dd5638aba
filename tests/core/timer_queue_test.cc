#include "core/timer_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "core/rng.h"

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

// The ordered map TimerQueue used to be, as the reference: timers by
// (deadline, scheduling order), cancelled ones erased at once.
class ReferenceQueue {
 public:
  uint64_t schedule(TimePoint deadline, int tag) {
    const uint64_t order = next_++;
    timers_.emplace(std::pair{deadline, order}, tag);
    return order;
  }
  bool cancel(uint64_t order) {
    return std::erase_if(timers_, [&](const auto& t) { return t.first.second == order; }) > 0;
  }
  std::optional<TimePoint> next_deadline() const {
    if (timers_.empty()) return std::nullopt;
    return timers_.begin()->first.first;
  }
  // The tag of the timer due next at `now`, taken out.
  std::optional<int> pop_due(TimePoint now) {
    if (timers_.empty() || timers_.begin()->first.first > now) return std::nullopt;
    const int tag = timers_.begin()->second;
    timers_.erase(timers_.begin());
    return tag;
  }
  size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<TimePoint, uint64_t>, int> timers_;
  uint64_t next_ = 0;
};

TEST(TimerQueue, MatchesOrderedMapUnderRandomScheduleCancelAndRun) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    TimerQueue queue;
    ReferenceQueue reference;
    std::vector<std::pair<TimerId, uint64_t>> handles;  // (queue id, reference order)
    std::vector<int> fired;
    int64_t now = 0;
    int next_tag = 0;
    auto schedule = [&](int64_t deadline) {
      const int tag = next_tag++;
      // Deadlines from a small range, so many timers share an instant.
      const TimerId id = queue.schedule(at(deadline), [&fired, tag] { fired.push_back(tag); });
      handles.emplace_back(id, reference.schedule(at(deadline), tag));
    };
    for (int step = 0; step < 3000; ++step) {
      const uint64_t op = rng.below(10);
      if (op < 5) {
        schedule(now + static_cast<int64_t>(rng.below(50)));
      } else if (op < 8 && !handles.empty()) {
        const auto [id, order] = handles[rng.below(handles.size())];
        ASSERT_EQ(queue.cancel(id), reference.cancel(order));
      } else {
        now += static_cast<int64_t>(rng.below(20));
        fired.clear();
        const size_t ran = queue.run_due(at(now));
        std::vector<int> expected;
        while (auto tag = reference.pop_due(at(now))) expected.push_back(*tag);
        ASSERT_EQ(fired, expected);
        ASSERT_EQ(ran, expected.size());
      }
      ASSERT_EQ(queue.size(), reference.size());
      ASSERT_EQ(queue.next_deadline(), reference.next_deadline());
    }
  }
}

TEST(TimerQueue, CancelAfterFiringOrTwiceFails) {
  TimerQueue queue;
  int ran = 0;
  const TimerId first = queue.schedule(at(1), [&] { ++ran; });
  const TimerId second = queue.schedule(at(2), [&] { ++ran; });
  EXPECT_NE(first, second);
  EXPECT_EQ(queue.run_due(at(1)), 1u);
  EXPECT_FALSE(queue.cancel(first));
  EXPECT_TRUE(queue.cancel(second));
  EXPECT_FALSE(queue.cancel(second));
  EXPECT_FALSE(queue.cancel(kNoTimer));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.run_due(at(10)), 0u);
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace mesh::core
