#include "routine/invocation_metrics.h"

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Times in ms after an arbitrary origin (microseconds in the message).
int64_t ms(int64_t value) { return 5'000'000'000 + value * 1000; }

void add_command(proto::InvocationMsg& invocation, uint32_t index, proto::CommandStatus status, int64_t done_ms) {
  proto::CommandStep& command = *invocation.add_commands();
  command.set_index(index);
  command.set_status(status);
  invocation.add_command_done_at_us(ms(done_ms));
}

// Triggered at 0, every lock held at 300, command 1 done at 350, command 2
// (kept 2 s) done at 400, ended (locks released) at 2450.
proto::InvocationMsg finished_ok() {
  proto::InvocationMsg invocation;
  invocation.set_seq(4);
  invocation.set_phase(proto::PHASE_DONE);
  invocation.set_outcome(proto::INVOCATION_OK);
  invocation.set_triggered_at_us(ms(0));
  invocation.set_locked_at_us(ms(300));
  add_command(invocation, 0, proto::COMMAND_OK, 350);
  add_command(invocation, 1, proto::COMMAND_OK, 400);
  invocation.set_releasing_at_us(ms(2400));
  invocation.set_ended_at_us(ms(2450));
  return invocation;
}

TEST(InvocationMetrics, WaitEndToEndIdealRunAndOverheadOfARoutineThatRanEveryCommand) {
  const InvocationMetrics m = invocation_metrics(finished_ok(), {milliseconds(0), seconds(2)});
  ASSERT_TRUE(m.wait && m.end_to_end && m.back_to_back && m.latency_overhead);
  EXPECT_EQ(*m.wait, milliseconds(300));
  EXPECT_EQ(*m.end_to_end, milliseconds(2450));
  // Command 1: [300, 350); command 2: [350, 400 + 2000).
  EXPECT_EQ(*m.back_to_back, milliseconds(2100));
  EXPECT_DOUBLE_EQ(*m.latency_overhead, 2450.0 / 2100.0);
  EXPECT_EQ(m.rollback_commands, 0u);
}

TEST(InvocationMetrics, RecordedStartsGiveTheRunWithoutItsGapsAndTheStretch) {
  // EV: command 1 sent at 310, done at 350; command 2 waited for its device
  // and was sent at 500, done at 540, then kept 2 s.
  proto::InvocationMsg invocation = finished_ok();
  invocation.set_ended_at_us(ms(2600));
  invocation.set_command_done_at_us(1, ms(540));
  invocation.mutable_commands(0)->set_started_at_us(ms(310));
  invocation.mutable_commands(1)->set_started_at_us(ms(500));
  const InvocationMetrics m = invocation_metrics(invocation, {milliseconds(0), seconds(2)});
  ASSERT_TRUE(m.back_to_back && m.stretch && m.latency_overhead);
  EXPECT_EQ(*m.back_to_back, milliseconds(40 + 2040));
  EXPECT_DOUBLE_EQ(*m.stretch, (150.0 + 2080.0) / 2080.0);
  EXPECT_DOUBLE_EQ(*m.latency_overhead, 2600.0 / 2080.0);

  // A command an earlier leader sent has no start: back to back from
  // EXECUTING, as without starts, and no stretch.
  invocation.mutable_commands(0)->set_started_at_us(0);
  const InvocationMetrics unknown = invocation_metrics(invocation, {milliseconds(0), seconds(2)});
  ASSERT_TRUE(unknown.back_to_back);
  EXPECT_EQ(*unknown.back_to_back, milliseconds(2540 - 300));
  EXPECT_FALSE(unknown.stretch);
  EXPECT_FALSE(invocation_metrics(finished_ok(), {milliseconds(0), seconds(2)}).stretch);
}

// A run (routine/routine_combo.h): command 2 went out at 320, before
// command 1 (sent at 310) was done at 350, and was done at 360. The time
// they overlap counts once, so the stretch is 1, never below; a command of
// a run done before the one before it adds nothing.
TEST(InvocationMetrics, CommandsSentTogetherCountTheirOverlapOnce) {
  proto::InvocationMsg invocation = finished_ok();
  invocation.set_command_done_at_us(1, ms(360));
  invocation.mutable_commands(0)->set_started_at_us(ms(310));
  invocation.mutable_commands(1)->set_started_at_us(ms(320));
  const InvocationMetrics m = invocation_metrics(invocation, {milliseconds(0), milliseconds(0)});
  ASSERT_TRUE(m.back_to_back && m.stretch);
  EXPECT_EQ(*m.back_to_back, milliseconds(50));
  EXPECT_DOUBLE_EQ(*m.stretch, 1.0);

  invocation.set_command_done_at_us(1, ms(340));
  const InvocationMetrics inside = invocation_metrics(invocation, {milliseconds(0), milliseconds(0)});
  ASSERT_TRUE(inside.back_to_back && inside.stretch);
  EXPECT_EQ(*inside.back_to_back, milliseconds(40));
  EXPECT_DOUBLE_EQ(*inside.stretch, 1.0);
}

TEST(InvocationMetrics, AFailedBestEffortCommandKeepsNoDevice) {
  proto::InvocationMsg invocation = finished_ok();
  invocation.mutable_commands(1)->set_status(proto::COMMAND_DEVICE_DOWN);
  invocation.set_releasing_at_us(ms(420));
  invocation.set_ended_at_us(ms(500));
  const InvocationMetrics m = invocation_metrics(invocation, {milliseconds(0), seconds(2)});
  ASSERT_TRUE(m.back_to_back && m.latency_overhead);
  EXPECT_EQ(*m.back_to_back, milliseconds(100));
  EXPECT_DOUBLE_EQ(*m.latency_overhead, 5.0);
}

TEST(InvocationMetrics, AnAbortedInvocationHasNoIdealRunButCountsItsRollback) {
  proto::InvocationMsg invocation = finished_ok();
  invocation.set_outcome(proto::INVOCATION_ABORTED);
  invocation.mutable_commands(1)->set_status(proto::COMMAND_REFUSED);
  invocation.add_undone()->set_index(0);
  const InvocationMetrics m = invocation_metrics(invocation, {milliseconds(0), seconds(2)});
  EXPECT_EQ(m.wait, milliseconds(300));
  EXPECT_EQ(m.end_to_end, milliseconds(2450));
  EXPECT_FALSE(m.back_to_back);
  EXPECT_FALSE(m.latency_overhead);
  EXPECT_EQ(m.rollback_commands, 1u);
}

TEST(InvocationMetrics, ARunningInvocationHasOnlyWhatItReached) {
  proto::InvocationMsg invocation;
  invocation.set_phase(proto::PHASE_ACQUIRING_LOCKS);
  invocation.set_triggered_at_us(ms(0));
  InvocationMetrics m = invocation_metrics(invocation, {});
  EXPECT_FALSE(m.wait);
  EXPECT_FALSE(m.end_to_end);

  invocation.set_phase(proto::PHASE_EXECUTING);
  invocation.set_locked_at_us(ms(120));
  m = invocation_metrics(invocation, {});
  EXPECT_EQ(m.wait, milliseconds(120));
  EXPECT_FALSE(m.end_to_end);
  EXPECT_FALSE(m.latency_overhead);
}

TEST(InvocationMetrics, HoldsThatDoNotMatchItsCommandsGiveNoIdealRun) {
  // Another definition (or a plan's commands not counted): the durations
  // would be guesses.
  const InvocationMetrics m = invocation_metrics(finished_ok(), {seconds(2)});
  EXPECT_FALSE(m.back_to_back);
  EXPECT_FALSE(m.latency_overhead);
  EXPECT_EQ(m.end_to_end, milliseconds(2450));
}

TEST(InvocationMetrics, HoldsFollowTheWholeCommandListPreconditionsIncluded) {
  RoutineSpec spec;
  spec.commands.push_back({"sprinkler", {{"power", true}}, std::chrono::minutes(15), true, {}});
  spec.commands.push_back({"lamp", {{"power", false}}, std::nullopt, true, {}});
  EXPECT_EQ(command_holds(spec, {}), (std::vector<core::Duration>{std::chrono::minutes(15), core::Duration{}}));
  // A precondition command before the lamp keeps nothing.
  const std::vector<PreconditionCommand> plan = {{1, "fan", {{"power", false}}, {"lamp_needs_fan_off"}}};
  EXPECT_EQ(command_holds(spec, plan),
            (std::vector<core::Duration>{std::chrono::minutes(15), core::Duration{}, core::Duration{}}));
}

}  // namespace
}  // namespace mesh::routine
