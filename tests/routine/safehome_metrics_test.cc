#include "routine/safehome_metrics.h"

#include <string>

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

core::TimePoint at(int seconds) { return core::TimePoint(std::chrono::seconds(seconds)); }

ScheduledRoutine routine(InvocationId id, int arrival, const std::vector<std::tuple<std::string, int, int>>& commands) {
  ScheduledRoutine scheduled{id, at(arrival), {}};
  for (const auto& [device, start, end] : commands) scheduled.commands.push_back({device, at(start), at(end)});
  return scheduled;
}

// R1: a [1,3), b [4,5). R2: a [3,4), c [4,6). R3: b [2,4). R4: d [4,6).
std::vector<ScheduledRoutine> tiny_schedule() {
  return {
      routine(1, 0, {{"a", 1, 3}, {"b", 4, 5}}),
      routine(2, 0, {{"a", 3, 4}, {"c", 4, 6}}),
      routine(3, 2, {{"b", 2, 4}}),
      routine(4, 4, {{"d", 4, 6}}),
  };
}

TEST(SafeHomeMetrics, LatencyOfEachRoutine) {
  auto schedule = tiny_schedule();
  EXPECT_EQ(wait_time(schedule[0]), std::chrono::seconds(1));
  EXPECT_EQ(end_to_end(schedule[0]), std::chrono::seconds(5));
  EXPECT_EQ(back_to_back(schedule[0]), std::chrono::seconds(3));
  EXPECT_DOUBLE_EQ(latency_overhead(schedule[0]), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(ev_stretch(schedule[0]), 4.0 / 3.0);  // one 1 s gap between a and b

  EXPECT_EQ(wait_time(schedule[1]), std::chrono::seconds(3));
  EXPECT_DOUBLE_EQ(latency_overhead(schedule[1]), 2.0);
  EXPECT_DOUBLE_EQ(ev_stretch(schedule[1]), 1.0);
  EXPECT_EQ(wait_time(schedule[2]), std::chrono::seconds(0));
  EXPECT_DOUBLE_EQ(latency_overhead(schedule[2]), 1.0);
}

TEST(SafeHomeMetrics, TemporaryIncongruenceFromTheFirstAttack) {
  auto schedule = tiny_schedule();
  // R1 runs [1,5); R2's command on a starts at 3, inside R1's run after
  // R1's own command on a: (5 - 3) / (5 - 1).
  EXPECT_DOUBLE_EQ(temporary_incongruence(schedule[0], schedule), 0.5);
  // R1's command on a started before R2's: no attack on R2.
  EXPECT_DOUBLE_EQ(temporary_incongruence(schedule[1], schedule), 0.0);
  // R1's command on b starts at 4, when R3 (which ends at 4) is done.
  EXPECT_DOUBLE_EQ(temporary_incongruence(schedule[2], schedule), 0.0);
}

TEST(SafeHomeMetrics, ParallelismLevelOnlyWhereTheCountChanges) {
  // Running: 1 from 1, 2 from 2, 3 from 3; at 4 R3 ends as R4 starts (no
  // change, not sampled); 2 from 5; all end at 6 (the run's end, not
  // sampled). (1 + 2 + 3 + 2) / 4.
  EXPECT_DOUBLE_EQ(parallelism_level(tiny_schedule()), 2.0);
  EXPECT_DOUBLE_EQ(parallelism_level({}), 0.0);
}

TEST(SafeHomeMetrics, OrderMismatchPerDeviceAveraged) {
  // a: R1, R2 (in order: 0 swaps of 1 pair); b: R3, R1 (1 of 1); c and d
  // have one routine each and do not count.
  EXPECT_DOUBLE_EQ(order_mismatch(tiny_schedule()), 0.5);
  // Three routines in reverse order on one device: 3 swaps of 3 pairs.
  EXPECT_DOUBLE_EQ(
      order_mismatch({routine(3, 0, {{"a", 0, 1}}), routine(2, 0, {{"a", 1, 2}}), routine(1, 0, {{"a", 2, 3}})}), 1.0);
}

TEST(SafeHomeMetrics, FinalIncongruenceIsTheClosestSerialOrder) {
  FinalStateInput input;
  input.initial = {{"door", "unlocked"}, {"tv", "on"}};
  input.actual_end = {{"lamp", "on"}, {"fan", "off"}, {"door", "unlocked"}, {"tv", "off"}};
  input.committed_writes = {
      {1, {{"lamp", "on"}, {"fan", "on"}}},
      {2, {{"lamp", "off"}, {"fan", "off"}}},
      {3, {{"door", "locked"}}},
  };
  // lamp says R1 last, fan says R2 last: one of them is off in any order.
  // The door was locked by the only writer but ends unlocked; the tv has no
  // writer and changed.
  auto result = final_incongruence(input);
  EXPECT_EQ(result.incongruent_devices, 3u);
  EXPECT_EQ(result.devices, 4u);
  EXPECT_TRUE(result.exact);
  EXPECT_DOUBLE_EQ(result.fraction(), 0.75);

  // Every routine ran in id order: congruent.
  input.actual_end = {{"lamp", "off"}, {"fan", "off"}, {"door", "locked"}, {"tv", "on"}};
  EXPECT_EQ(final_incongruence(input).incongruent_devices, 0u);
}

TEST(SafeHomeMetrics, FinalIncongruenceSearchesEveryOrderOfASmallGroup) {
  FinalStateInput input;
  input.actual_end = {{"p", "y"}, {"q", "x"}, {"r", "x"}, {"s", "x"}};
  input.committed_writes = {
      {1, {{"q", "y"}, {"r", "x"}, {"s", "y"}}},
      {2, {{"p", "x"}, {"q", "x"}}},
      {3, {{"p", "y"}, {"r", "y"}, {"s", "x"}}},
  };
  // Order 1, 2, 3 misses only r. Choosing greedily from the end would put
  // 2 last (one miss, p; 3 also costs one, 1 costs two), then 1 (s), and
  // end at two.
  auto result = final_incongruence(input);
  EXPECT_EQ(result.incongruent_devices, 1u);
  EXPECT_TRUE(result.exact);
}

// Routines 1..20, routine k writing d(k-1) and d(k) with "vk": a chain
// that links them all into one group, too large for the exhaustive search.
FinalStateInput chain_of_twenty() {
  FinalStateInput input;
  for (InvocationId k = 1; k <= 20; ++k) {
    std::string value = "v" + std::to_string(k);
    input.committed_writes[k] = {{"d" + std::to_string(k - 1), value}, {"d" + std::to_string(k), value}};
  }
  // Run in id order: d0 keeps routine 1's value, dk routine k+1's, d20 routine 20's.
  for (int k = 0; k <= 20; ++k) input.actual_end["d" + std::to_string(k)] = "v" + std::to_string(std::min(k + 1, 20));
  return input;
}

TEST(SafeHomeMetrics, FinalIncongruenceOfALargeGroupIsExactWhenCongruent) {
  auto result = final_incongruence(chain_of_twenty());
  EXPECT_EQ(result.incongruent_devices, 0u);
  EXPECT_TRUE(result.exact);
}

TEST(SafeHomeMetrics, FinalIncongruenceOfALargeGroupIsAnUpperBoundOtherwise) {
  // d1 needs routine 2 after 1, a new device y routine 1 after 2: one of
  // the two is always off.
  auto input = chain_of_twenty();
  input.committed_writes[1]["y"] = "v1";
  input.committed_writes[2]["y"] = "v2";
  input.actual_end["y"] = "v1";
  auto result = final_incongruence(input);
  EXPECT_EQ(result.incongruent_devices, 1u);
  EXPECT_FALSE(result.exact);
}

TEST(SafeHomeMetrics, AbortRateAndRollbacksPerAbort) {
  auto stats = abort_stats({{1, false, 0}, {2, true, 3}, {3, false, 0}, {4, true, 1}});
  EXPECT_DOUBLE_EQ(stats.abort_rate, 0.5);
  EXPECT_DOUBLE_EQ(stats.rollback_commands_per_abort, 2.0);
  auto none = abort_stats({{1, false, 0}});
  EXPECT_DOUBLE_EQ(none.abort_rate, 0.0);
  EXPECT_DOUBLE_EQ(none.rollback_commands_per_abort, 0.0);
}

}  // namespace
}  // namespace mesh::routine
