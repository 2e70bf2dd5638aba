#include "routine/timeline_scheduler.h"

#include <map>

#include <gtest/gtest.h>

#include "routine/lazy_scheduler.h"
#include "routine/lineage.h"
#include "routine/safehome_metrics.h"
#include "routine/serial_order_check.h"

namespace mesh::routine {
namespace {

core::TimePoint at(int seconds) { return core::TimePoint(std::chrono::seconds(seconds)); }
core::Duration secs(int seconds) { return std::chrono::seconds(seconds); }

// Puts a hand-made access of `invocation` on `device` during [start, end).
void put(LineageTable& table, const std::string& device, InvocationId invocation, int start, int end) {
  ASSERT_TRUE(table.insert(device, {invocation, at(start), at(end), AccessStatus::scheduled}));
}

RoutineArrival arrival(InvocationId id, int when, const std::vector<std::pair<std::string, int>>& commands) {
  RoutineArrival routine{id, at(when), {}};
  for (const auto& [device, duration] : commands) routine.commands.push_back({device, secs(duration)});
  return routine;
}

std::vector<PlacedCommand> slots(const std::vector<std::tuple<std::string, int, int>>& expected) {
  std::vector<PlacedCommand> placed;
  placed.reserve(expected.size());
  for (const auto& [device, start, end] : expected) placed.push_back({device, at(start), at(end)});
  return placed;
}

TEST(Lineage, RefusesOverlapsAndKeepsTimeOrder) {
  LineageTable table;
  put(table, "a", 1, 4, 6);
  put(table, "a", 2, 0, 2);
  EXPECT_FALSE(table.insert("a", {3, at(5), at(7), AccessStatus::scheduled}));
  EXPECT_FALSE(table.insert("a", {3, at(3), at(3), AccessStatus::scheduled}));
  ASSERT_EQ(table.find("a")->accesses().size(), 2u);
  EXPECT_EQ(table.find("a")->accesses()[0].invocation, 2u);
  // An aborted access no longer holds its time.
  table.abort(1);
  EXPECT_TRUE(table.insert("a", {3, at(5), at(7), AccessStatus::scheduled}));
}

TEST(Lineage, StatusesFollowTheClock) {
  LineageTable table;
  put(table, "a", 1, 0, 2);
  put(table, "a", 2, 2, 4);
  put(table, "a", 3, 4, 6);
  table.advance(at(3));
  const auto& accesses = table.find("a")->accesses();
  EXPECT_EQ(accesses[0].status, AccessStatus::released);
  EXPECT_EQ(accesses[1].status, AccessStatus::acquired);
  EXPECT_EQ(accesses[2].status, AccessStatus::scheduled);
  EXPECT_EQ(to_string(accesses[1].status), "acquired");
  table.commit(1);
  table.advance(at(10));
  EXPECT_EQ(accesses[0].status, AccessStatus::committed);
  EXPECT_EQ(accesses[2].status, AccessStatus::released);
}

TEST(TimelineScheduler, FirstFitThenJustInTime) {
  // a: R1 [0,2) ... R2 [9,10); b: R4 [2,6). R3 = a 1 s, then b 2 s.
  LineageTable table;
  put(table, "a", 1, 0, 2);
  put(table, "a", 2, 9, 10);
  put(table, "b", 4, 2, 6);
  LineageTable without_jit = table;

  auto placed = TimelineScheduler(table).place(arrival(3, 0, {{"a", 1}, {"b", 2}}));
  ASSERT_TRUE(placed);
  EXPECT_FALSE(placed->appended);
  // First fit puts a at [2,3) and b, busy until 6, at [6,8); just in time
  // then moves a to end where b starts.
  EXPECT_EQ(placed->routine.commands, slots({{"a", 5, 6}, {"b", 6, 8}}));

  auto first_fit = TimelineScheduler(without_jit, {.just_in_time = false}).place(arrival(3, 0, {{"a", 1}, {"b", 2}}));
  ASSERT_TRUE(first_fit);
  EXPECT_EQ(first_fit->routine.commands, slots({{"a", 2, 3}, {"b", 6, 8}}));
  EXPECT_TRUE(without_jit.find("a")->accesses()[1] == (LockAccess{3, at(2), at(3), AccessStatus::scheduled}));
}

TEST(TimelineScheduler, BacktracksWhenTheNextCommandWouldReverseAnOrder) {
  // R2 runs b [0,1) then a [4,6); R1 used a before it. R3 = a, b.
  // a's first gap [2,3) puts R3 before R2 on a, but b can only go after R2
  // (R2 before R3): a cycle, so a moves to its next gap, after R2.
  LineageTable table;
  put(table, "a", 1, 0, 2);
  put(table, "a", 2, 4, 6);
  put(table, "b", 2, 0, 1);
  auto placed = TimelineScheduler(table).place(arrival(3, 0, {{"a", 1}, {"b", 1}}));
  ASSERT_TRUE(placed);
  EXPECT_FALSE(placed->appended);
  EXPECT_EQ(placed->routine.commands, slots({{"a", 6, 7}, {"b", 7, 8}}));
  EXPECT_FALSE(table.precedence().find_cycle());
}

TEST(TimelineScheduler, RejectsACycleThroughAThirdRoutineOnOtherDevices) {
  // R1 before R2 on d1; R2 on d2 until 3; R1 on d3 at [5,6).
  // R3 = d2, then d3, arriving at 3.
  LineageTable table;
  put(table, "d1", 1, 0, 1);
  put(table, "d1", 2, 1, 2);
  put(table, "d2", 2, 2, 3);
  put(table, "d3", 1, 5, 6);

  // First fit would put R3 on d2 at [3,4) (after R2) and on d3 at [4,5)
  // (before R1). The authors' check (Algorithm 1, line 12, and their
  // simulator) only compares the routines next to R3 on its own devices:
  // before = {R2}, after = {R1}, disjoint, so it accepts. Yet R1 -> R2 (d1)
  // -> R3 (d2) -> R1 (d3) is a cycle: no serial order has that end state.
  LineageTable accepted_by_authors = table;
  put(accepted_by_authors, "d2", 3, 3, 4);
  put(accepted_by_authors, "d3", 3, 4, 5);
  auto cycle = accepted_by_authors.precedence().find_cycle();
  ASSERT_TRUE(cycle);
  EXPECT_EQ(cycle->size(), 3u);

  // Checked transitively, R2's ancestors {R1, R2} meet R1's descendants
  // {R1, R2}: rejected, and d3 goes to the gap after R1.
  auto placed = TimelineScheduler(table).place(arrival(3, 3, {{"d2", 1}, {"d3", 1}}));
  ASSERT_TRUE(placed);
  EXPECT_FALSE(placed->appended);
  EXPECT_EQ(placed->routine.commands, slots({{"d2", 5, 6}, {"d3", 6, 7}}));
  EXPECT_FALSE(table.precedence().find_cycle());
}

TEST(TimelineScheduler, PreLeaseLetsARoutineUseADeviceBeforeItsHoldersFirstUse) {
  // R1 started at 0 on x and holds d until its command there at [4,5).
  LineageTable leasing;
  put(leasing, "x", 1, 0, 4);
  put(leasing, "d", 1, 4, 5);
  LineageTable no_pre = leasing;
  auto pre = TimelineScheduler(leasing).place(arrival(2, 0, {{"d", 1}}));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->routine.commands, slots({{"d", 0, 1}}));  // before R1: serialized first
  auto none = TimelineScheduler(no_pre, {.pre_lease = false}).place(arrival(2, 0, {{"d", 1}}));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->routine.commands, slots({{"d", 5, 6}}));  // waits for R1's use
}

TEST(TimelineScheduler, WithoutPreLeaseTheRoutineStartsLaterInsteadOfBeingAppended) {
  // b: R1 [1,3), R3 [10,12). R2 = a 1 s (a unused), then b 1 s. a at [0,1)
  // puts R1's use of b inside R2's hold of b before R2 uses it, which needs a
  // pre-lease; a is in its last gap, but starting it once R1 is done clears
  // that, and R2 still fits before R3.
  LineageTable table;
  put(table, "b", 1, 1, 3);
  put(table, "b", 3, 10, 12);
  auto placed = TimelineScheduler(table, {.pre_lease = false}).place(arrival(2, 0, {{"a", 1}, {"b", 1}}));
  ASSERT_TRUE(placed);
  EXPECT_FALSE(placed->appended);
  EXPECT_EQ(placed->routine.commands, slots({{"a", 3, 4}, {"b", 4, 5}}));
  EXPECT_FALSE(table.precedence().find_cycle());
}

TEST(TimelineScheduler, PostLeaseLetsARoutineUseADeviceBeforeItsHolderFinishes) {
  // R1 used d at [0,1) and runs on x until 5.
  LineageTable leasing;
  put(leasing, "d", 1, 0, 1);
  put(leasing, "x", 1, 1, 5);
  LineageTable no_post = leasing;
  auto post = TimelineScheduler(leasing).place(arrival(2, 1, {{"d", 1}}));
  ASSERT_TRUE(post);
  EXPECT_EQ(post->routine.commands, slots({{"d", 1, 2}}));
  auto none = TimelineScheduler(no_post, {.post_lease = false}).place(arrival(2, 1, {{"d", 1}}));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->routine.commands, slots({{"d", 5, 6}}));  // after R1 commits
}

TEST(TimelineScheduler, WithoutPostLeaseNobodyUsesADeviceTheNewRoutineStillHolds) {
  // R1 uses d at [3,4). R2 = d 1 s, then x 5 s, arriving at 0.
  LineageTable leasing;
  put(leasing, "d", 1, 3, 4);
  LineageTable no_post = leasing;
  auto post = TimelineScheduler(leasing).place(arrival(2, 0, {{"d", 1}, {"x", 5}}));
  ASSERT_TRUE(post);
  // R2 lends d to R1 after its use: R1's [3,4) falls in R2's hold [1,6).
  EXPECT_EQ(post->routine.commands, slots({{"d", 0, 1}, {"x", 1, 6}}));
  auto none = TimelineScheduler(no_post, {.post_lease = false}).place(arrival(2, 0, {{"d", 1}, {"x", 5}}));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->routine.commands, slots({{"d", 4, 5}, {"x", 5, 10}}));
}

TEST(TimelineScheduler, OutOfProbesTheRoutineIsAppendedAfterEverything) {
  LineageTable table;
  put(table, "a", 1, 0, 2);
  put(table, "a", 2, 9, 10);
  put(table, "b", 4, 2, 6);
  auto placed = TimelineScheduler(table, {.max_probes = 1}).place(arrival(3, 0, {{"a", 1}, {"b", 2}}));
  ASSERT_TRUE(placed);
  EXPECT_TRUE(placed->appended);
  EXPECT_EQ(placed->probes, 1u);
  EXPECT_EQ(placed->routine.commands, slots({{"a", 10, 11}, {"b", 11, 13}}));
  EXPECT_FALSE(table.precedence().find_cycle());
}

TEST(TimelineScheduler, RefusesRoutinesWithoutCommandsOrWithEmptyCommands) {
  LineageTable table;
  EXPECT_FALSE(TimelineScheduler(table).place(arrival(1, 0, {})));
  EXPECT_FALSE(TimelineScheduler(table).place(arrival(1, 0, {{"a", 0}})));
  EXPECT_TRUE(table.lineages().empty());
}

// With a lease kind off, no routine's access lies in the part of another
// routine's hold of that device that the kind would lend.
bool respects_disabled_leases(const LineageTable& table, bool pre, bool post) {
  auto spans = table.spans();
  for (const auto& [device, lineage] : table.lineages()) {
    std::map<InvocationId, std::pair<core::TimePoint, core::TimePoint>> uses;
    for (const auto& access : lineage.accesses()) {
      auto [it, added] = uses.try_emplace(access.invocation, access.start, access.end);
      if (!added) it->second.second = std::max(it->second.second, access.end);
    }
    for (const auto& [holder, use] : uses) {
      for (const auto& access : lineage.accesses()) {
        if (access.invocation == holder) continue;
        bool in_pre = access.start < use.first && spans[holder].start < access.end;
        bool in_post = access.start < spans[holder].finish && use.second < access.end;
        if ((!pre && in_pre) || (!post && in_post)) return false;
      }
    }
  }
  return true;
}

// A deterministic mix of 40 routines of 1-3 commands on four devices, two
// arriving per second.
std::vector<RoutineArrival> mixed_routines() {
  const std::vector<std::string> devices = {"a", "b", "c", "d"};
  std::vector<RoutineArrival> routines;
  for (InvocationId id = 1; id <= 40; ++id) {
    std::vector<std::pair<std::string, int>> commands;
    size_t count = 1 + id % 3;
    for (size_t i = 0; i < count; ++i) {
      commands.emplace_back(devices[(id * 7 + i * 3) % devices.size()], 1 + static_cast<int>((id + i) % 4));
    }
    routines.push_back(arrival(id, static_cast<int>(id / 2), commands));
  }
  return routines;
}

TEST(TimelineScheduler, ManyRoutinesKeepThePrecedenceAcyclicAndLeasesAsConfigured) {
  for (bool pre : {true, false}) {
    for (bool post : {true, false}) {
      LineageTable table;
      TimelineScheduler scheduler(table, {.pre_lease = pre, .post_lease = post});
      for (const auto& routine : mixed_routines()) {
        ASSERT_TRUE(scheduler.place(routine));
        ASSERT_FALSE(table.precedence().find_cycle()) << "after " << routine.id << " pre " << pre << " post " << post;
        ASSERT_TRUE(respects_disabled_leases(table, pre, post))
            << "after " << routine.id << " pre " << pre << " post " << post;
      }
    }
  }
}

TEST(TimelineScheduler, ItsSchedulesPassTheSerialOrderOracle) {
  // Run the placements as planned, every routine writing its own value on
  // each of its devices, and commit them all: the oracle must find a serial
  // order with the same end state, and final incongruence must be 0.
  LineageTable table;
  TimelineScheduler scheduler(table);
  ExecutionRecord record;
  FinalStateInput final_state;
  std::map<std::string, std::pair<core::TimePoint, std::string>> last_write;
  for (const auto& routine : mixed_routines()) {
    auto placed = scheduler.place(routine);
    ASSERT_TRUE(placed);
    std::string value = "v" + std::to_string(routine.id);
    record.committed.insert(routine.id);
    for (const auto& command : placed->routine.commands) {
      record.actuations.push_back({command.device, command.start, ActuationKind::command, routine.id, value});
      record.intended_writes[routine.id][command.device] = value;
      final_state.committed_writes[routine.id][command.device] = value;
      auto& last = last_write[command.device];
      if (last.second.empty() || command.start > last.first) last = {command.start, value};
    }
  }
  EXPECT_EQ(check_serial_order(record), std::nullopt);
  for (const auto& [device, write] : last_write) final_state.actual_end[device] = write.second;
  auto incongruence = final_incongruence(final_state);
  EXPECT_EQ(incongruence.incongruent_devices, 0u);
  EXPECT_TRUE(incongruence.exact);
}

TEST(PlanCommands, LongCommandsKeepTheirDurationShortOnesTheEstimate) {
  RoutineSpec spec;
  spec.commands.push_back({"sprinkler", {{"power", true}}, std::chrono::minutes(15), true, {}});
  spec.commands.push_back({"lamp", {{"power", false}}, std::nullopt, false, {}});
  auto planned = plan_commands(spec);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0], (PlannedCommand{"sprinkler", std::chrono::minutes(15)}));
  EXPECT_EQ(planned[1], (PlannedCommand{"lamp", kShortCommandEstimate}));
}

TEST(LazyScheduler, FcfsWaitsForAReleaseJitStartsOnArrival) {
  // A holds d1 over [0,4). B (d2, free) arrives at 1, C (d1) at 2.
  std::vector<RoutineArrival> routines = {
      arrival(1, 0, {{"d1", 4}}),
      arrival(2, 1, {{"d2", 1}}),
      arrival(3, 2, {{"d1", 1}}),
  };
  LineageTable fcfs_table;
  auto fcfs = schedule_lazy(LazyPolicy::fcfs, routines, fcfs_table);
  ASSERT_EQ(fcfs.size(), 3u);
  EXPECT_EQ(fcfs[0].commands, slots({{"d1", 0, 4}}));
  // FCFS looks at waiters only at the release of d1, and then starts both.
  EXPECT_EQ(fcfs[1].commands, slots({{"d2", 4, 5}}));
  EXPECT_EQ(fcfs[2].commands, slots({{"d1", 4, 5}}));

  LineageTable jit_table;
  auto jit = schedule_lazy(LazyPolicy::jit, routines, jit_table);
  ASSERT_EQ(jit.size(), 3u);
  EXPECT_EQ(jit[1].commands, slots({{"d2", 1, 2}}));
  EXPECT_EQ(jit[2].commands, slots({{"d1", 4, 5}}));
  ASSERT_EQ(jit_table.find("d1")->accesses().size(), 2u);
}

TEST(LazyScheduler, ARoutineStartsOnlyWhenAllItsDevicesAreFree) {
  // A: d1 [0,2) then d2 [2,3). B wants d2 and d3, arriving at 1: d2 is
  // held by A from its start, so B starts when A releases d2 at 3. C wants
  // d1 at 1 and takes it when A releases it at 2.
  std::vector<RoutineArrival> routines = {
      arrival(1, 0, {{"d1", 2}, {"d2", 1}}),
      arrival(2, 1, {{"d2", 1}, {"d3", 1}}),
      arrival(3, 1, {{"d1", 1}}),
  };
  for (auto policy : {LazyPolicy::fcfs, LazyPolicy::jit}) {
    LineageTable table;
    auto run = schedule_lazy(policy, routines, table);
    ASSERT_EQ(run.size(), 3u);
    EXPECT_EQ(run[1].commands, slots({{"d2", 3, 4}, {"d3", 4, 5}}));
    EXPECT_EQ(run[2].commands, slots({{"d1", 2, 3}}));
  }
}

}  // namespace
}  // namespace mesh::routine
