#include "routine/serial_key_choice.h"

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

LineageSlot slot(const std::string& holder, int64_t key, int64_t first_use, int64_t done) {
  return LineageSlot{holder, key, first_use, done};
}

// B is placed on the lamp and will not use it before t=5000: a routine
// done with the lamp by then goes before it (a pre-lease); one that is not
// goes after it.
TEST(SerialKeyChoice, TimelineTakesTheFirstGapThatDelaysNobody) {
  const std::map<std::string, LineageView> lineages{{"lamp", {10, {slot("B#1", 20, 5000, 6000)}, false}}};
  const auto fits = choose_serial_key(EvScheduler::tl, true, 1, lineages, {{"lamp", {100, 1000}}});
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->key_us, 19);
  EXPECT_TRUE(fits->before_placed);
  const auto too_long = choose_serial_key(EvScheduler::tl, true, 1, lineages, {{"lamp", {100, 5500}}});
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->key_us, 21);
  EXPECT_FALSE(too_long->before_placed);
}

// Keys never go at or below a device's floor (someone after it used the
// device), and never below the trigger time when appended.
TEST(SerialKeyChoice, KeysStayAboveFloorsAndTheTriggerTime) {
  const std::map<std::string, LineageView> lineages{{"lamp", {25, {slot("B#1", 20, 5000, 6000)}, false}}};
  const auto choice = choose_serial_key(EvScheduler::tl, true, 1, lineages, {{"lamp", {100, 1000}}});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->key_us, 26);
  const auto later = choose_serial_key(EvScheduler::tl, true, 900, lineages, {{"lamp", {100, 1000}}});
  EXPECT_EQ(later->key_us, 900);
}

// Gap by gap, the lamp would take the routine before R2 and the fan only
// after R2 (R2 holds the fan until 3000): per device that is a cycle
// (X before R2, R2 before X). One key puts it on the same side of R2
// everywhere: after R2 (the fan's floor), and, starting once R2 is done
// with the lamp, still before R3 (which needs the fan only at 9000) rather
// than after everything.
TEST(SerialKeyChoice, OneKeyPutsTheRoutineOnOneSideOfAnotherEverywhere) {
  const std::map<std::string, LineageView> lineages{
      {"lamp", {0, {slot("R1#1", 10, 0, 50), slot("R2#1", 20, 4000, 4500)}, false}},
      {"fan", {20, {slot("R2#1", 20, 0, 3000), slot("R3#1", 30, 9000, 9500)}, false}}};
  const std::map<std::string, ExpectedUse> uses{{"lamp", {100, 1000}}, {"fan", {1000, 2000}}};
  const auto choice = choose_serial_key(EvScheduler::tl, true, 1, lineages, uses);
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->key_us, 29);
  EXPECT_TRUE(choice->before_placed);
  // A routine too long for the gap before R3 (it would still hold the fan
  // at 9000) goes after everything.
  const std::map<std::string, ExpectedUse> longer{{"lamp", {100, 1000}}, {"fan", {1000, 6000}}};
  const auto appended = choose_serial_key(EvScheduler::tl, true, 1, lineages, longer);
  ASSERT_TRUE(appended);
  EXPECT_EQ(appended->key_us, 31);
  EXPECT_FALSE(appended->before_placed);
}

TEST(SerialKeyChoice, FcfsAndNoPreLeaseAppendJitWaitsForIdleDevices) {
  const std::map<std::string, LineageView> busy{{"lamp", {10, {slot("B#1", 20, 5000, 6000)}, false}}};
  const std::map<std::string, ExpectedUse> uses{{"lamp", {100, 1000}}};
  EXPECT_EQ(choose_serial_key(EvScheduler::fcfs, true, 1, busy, uses)->key_us, 21);
  EXPECT_EQ(choose_serial_key(EvScheduler::tl, false, 1, busy, uses)->key_us, 21);
  EXPECT_FALSE(choose_serial_key(EvScheduler::jit, true, 1, busy, uses));
  const std::map<std::string, LineageView> idle{{"lamp", {20, {}, false}}};
  EXPECT_EQ(choose_serial_key(EvScheduler::jit, true, 1, idle, uses)->key_us, 21);
}

// Entries past those a lineage answer shows may sit anywhere above them: a
// gap is judged only below the last entry shown.
TEST(SerialKeyChoice, ATruncatedLineageIsJudgedOnlyWhereItWasShown) {
  std::map<std::string, LineageView> lineages{{"lamp", {0, {slot("B#1", 20, 5000, 6000)}, true}}};
  const std::map<std::string, ExpectedUse> uses{{"lamp", {100, 1000}}};
  EXPECT_EQ(choose_serial_key(EvScheduler::tl, true, 1, lineages, uses)->key_us, 19);
  lineages["lamp"].entries[0].expected_first_use_us = 500;  // no gap before B
  EXPECT_EQ(choose_serial_key(EvScheduler::tl, true, 1, lineages, uses)->key_us, 21);
}

TEST(SerialKeyChoice, SchedulersParseByName) {
  for (const EvScheduler scheduler : {EvScheduler::tl, EvScheduler::fcfs, EvScheduler::jit}) {
    EXPECT_EQ(parse_ev_scheduler(to_string(scheduler)), scheduler);
  }
  EXPECT_FALSE(parse_ev_scheduler("lifo"));
}

}  // namespace
}  // namespace mesh::routine
