#include "routine/serial_order_check.h"

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

core::TimePoint at(double seconds) { return core::TimePoint(core::from_seconds(seconds)); }

Actuation command(const std::string& device, double when, InvocationId invocation, const std::string& value) {
  return {device, at(when), ActuationKind::command, invocation, value};
}
Actuation rollback(const std::string& device, double when, InvocationId invocation, const std::string& value) {
  return {device, at(when), ActuationKind::rollback, invocation, value};
}
Actuation event(ActuationKind kind, const std::string& device, double when,
                std::optional<std::string> value = std::nullopt) {
  return {device, at(when), kind, 0, std::move(value)};
}

TEST(SerialOrderCheck, PassesASerialRunWithFailureEventsSerializedAfter) {
  // R1 closes the window and switches the AC on; the window fails after
  // R1's last touch of it (EV case 3) and comes back closed. R2 then sets
  // the AC off.
  ExecutionRecord record;
  record.initial_state = {{"window", "open"}, {"ac", "off"}};
  record.actuations = {
      command("window", 1, 1, "closed"), event(ActuationKind::failure, "window", 2),
      command("ac", 3, 1, "on"),         event(ActuationKind::restart, "window", 4, "closed"),
      command("ac", 5, 2, "off"),
  };
  record.committed = {1, 2};
  record.intended_writes = {{1, {{"window", "closed"}, {"ac", "on"}}}, {2, {{"ac", "off"}}}};
  EXPECT_EQ(check_serial_order(record), std::nullopt);
}

TEST(SerialOrderCheck, CatchesAnInterleavingCycle) {
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}, {"fan", "off"}};
  record.actuations = {
      command("lamp", 1, 1, "on"),
      command("lamp", 2, 2, "dim"),
      command("fan", 3, 2, "low"),
      command("fan", 4, 1, "high"),
  };
  record.committed = {1, 2};
  record.intended_writes = {{1, {{"lamp", "on"}, {"fan", "high"}}}, {2, {{"lamp", "dim"}, {"fan", "low"}}}};
  EXPECT_EQ(check_serial_order(record),
            "no serial order: precedence cycle invocation 1 before invocation 2 on lamp (1s then 2s), "
            "invocation 2 before invocation 1 on fan (3s then 4s)");
}

TEST(SerialOrderCheck, CatchesACommittedRoutineThatADeviceFailureInterrupted) {
  // EV case 4: the window failed between two of R1's commands on it, so R1
  // had to abort; committing it leaves the failure both after and before.
  ExecutionRecord record;
  record.initial_state = {{"window", "open"}};
  record.actuations = {command("window", 1, 1, "half"), event(ActuationKind::failure, "window", 2),
                       command("window", 3, 1, "closed")};
  record.committed = {1};
  record.intended_writes = {{1, {{"window", "closed"}}}};
  EXPECT_EQ(check_serial_order(record),
            "no serial order: precedence cycle invocation 1 before failure of window at 2s on window (1s then 2s), "
            "failure of window at 2s before invocation 1 on window (2s then 3s)");
}

TEST(SerialOrderCheck, CatchesAnEndStateNoSerialOrderGives) {
  // R3 aborts and rolls the lamp back to what it saw before it (R1's "on"),
  // but R2 had written the lamp since: the rollback clobbers a committed
  // write. Precedence is R1 -> R2, acyclic, yet the lamp ends "on".
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}};
  record.actuations = {
      command("lamp", 1, 1, "on"),
      command("lamp", 1.5, 3, "red"),
      command("lamp", 2, 2, "off"),
      rollback("lamp", 3, 3, "on"),
  };
  record.committed = {1, 2};
  record.aborted = {3};
  record.intended_writes = {{1, {{"lamp", "on"}}}, {2, {{"lamp", "off"}}}};
  EXPECT_EQ(check_serial_order(record),
            "lamp ends at 'on' (from aborted invocation 3's rollback at 3s) but the serial order "
            "[invocation 1, invocation 2] leaves it at 'off' (from invocation 2)");
}

TEST(SerialOrderCheck, CatchesALeftoverEffectOfAnAbortedRoutine) {
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}, {"fan", "off"}};
  record.actuations = {command("lamp", 1, 3, "on"), command("fan", 2, 3, "on"), rollback("fan", 3, 3, "off")};
  record.aborted = {3};
  EXPECT_EQ(check_serial_order(record),
            "lamp ends at 'on' (from aborted invocation 3's command at 1s) but the serial order [] leaves it at "
            "'off' (from its initial state)\n"
            "aborted invocation 3 left its write lamp='on' at 1s in place: no rollback and no later write");
}

TEST(SerialOrderCheck, ADeviceDeadForGoodExcusesItsUndoneWriteAndItsEndState) {
  // R3 wrote the lamp, the lamp failed and never came back, so R3's
  // rollback could not reach it; after a restart the write must be undone.
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}};
  record.actuations = {command("lamp", 1, 3, "on"), event(ActuationKind::failure, "lamp", 2)};
  record.aborted = {3};
  EXPECT_EQ(check_serial_order(record), std::nullopt);
  record.actuations.push_back(event(ActuationKind::restart, "lamp", 3));
  EXPECT_EQ(check_serial_order(record),
            "lamp ends at 'on' (from aborted invocation 3's command at 1s) but the serial order [failure of lamp at "
            "2s, restart of lamp at 3s] leaves it at 'off' (from its initial state)\n"
            "aborted invocation 3 left its write lamp='on' at 1s in place: no rollback and no later write");
}

TEST(SerialOrderCheck, UnderEvAnAbortedOverwriterRestoresWhatWasBeforeTheFirstAbortedWrite) {
  // R3 aborts after R4 overwrote the lamp (R3's undo is handed to R4); R4
  // aborts too and its rollback sets what was there before R3.
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}};
  record.actuations = {command("lamp", 1, 3, "on"), command("lamp", 2, 4, "dim"), rollback("lamp", 3, 4, "off")};
  record.aborted = {3, 4};
  EXPECT_EQ(check_serial_order(record, {.overwrite_excuses_rollback = true}), std::nullopt);
  // Had R4's rollback restored R3's write, R3's effect would stand.
  record.actuations.back().value = "on";
  EXPECT_NE(check_serial_order(record, {.overwrite_excuses_rollback = true}), std::nullopt);
}

TEST(SerialOrderCheck, AnOverwriteExcusesARollbackOnlyWhenTheModelSaysSo) {
  // R3 aborts without undoing the lamp, which committed R1 overwrote later.
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}};
  record.actuations = {command("lamp", 1, 3, "on"), command("lamp", 2, 1, "dim")};
  record.committed = {1};
  record.aborted = {3};
  record.intended_writes = {{1, {{"lamp", "dim"}}}};
  EXPECT_EQ(check_serial_order(record, {.overwrite_excuses_rollback = true}), std::nullopt);
  EXPECT_EQ(check_serial_order(record),
            "aborted invocation 3 left its write lamp='on' at 1s in place: no rollback (a later write is no excuse "
            "under this model)");
}

TEST(SerialOrderCheck, CatchesWritesThatNoOutcomeOrIntentExplains) {
  ExecutionRecord record;
  record.initial_state = {{"lamp", "off"}, {"fan", "off"}};
  record.actuations = {command("lamp", 1, 1, "dim"), command("fan", 2, 7, "on"), rollback("fan", 3, 7, "off")};
  record.committed = {1, 2};
  record.intended_writes = {{1, {{"lamp", "on"}}}, {2, {{"fan", "on"}}}};
  auto problems = check_serial_order(record);
  ASSERT_TRUE(problems);
  EXPECT_EQ(*problems,
            "invocation 7 actuated fan at 2s but is neither committed nor aborted\n"
            "committed invocation 1 last wrote lamp='dim' at 1s but intends 'on'\n"
            "committed invocation 2 never wrote fan (it intends 'on')\n"
            "fan ends at 'off' (from unknown invocation 7's rollback at 3s) but the serial order "
            "[invocation 1, invocation 2] leaves it at 'on' (from invocation 2)\n"
            "lamp ends at 'dim' (from committed invocation 1's command at 1s) but the serial order "
            "[invocation 1, invocation 2] leaves it at 'on' (from invocation 1)");
}

TEST(StrictVisibilityCheck, GlobalAllowsOneAtATimePartitionedOnePerDevice) {
  std::vector<ExecutionSpan> spans = {
      {1, at(0), at(2), {"lamp"}},
      {2, at(1), at(3), {"fan"}},
      {3, at(3), at(4), {"lamp", "fan"}},
  };
  EXPECT_EQ(check_global_strict(spans), "invocations 1 [0s, 2s) and 2 [1s, 3s) execute at once");
  EXPECT_EQ(check_partitioned_strict(spans), std::nullopt);
  EXPECT_EQ(check_global_strict({spans[0], spans[2]}), std::nullopt);  // back to back is fine

  spans.push_back({4, at(1.5), at(2.5), {"lamp"}});
  EXPECT_EQ(check_partitioned_strict(spans),
            "invocations 1 [0s, 2s) and 4 [1.5s, 2.5s) execute at once sharing device lamp");
}

}  // namespace
}  // namespace mesh::routine
