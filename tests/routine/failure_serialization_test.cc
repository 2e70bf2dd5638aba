#include "routine/failure_serialization.h"

#include <string>

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

// Fig. 3's six cases for a routine R that commands devices a and b (a
// twice in case 3), with c a device R does not touch; each case is the
// event counts and up flags R's finish point sees, per model.
struct Case {
  const char* name;
  uint64_t a_at_start;            // a's events when R started
  std::vector<uint64_t> a_touches;  // a's events as each of R's commands on a began
  DeviceAvailability a_now;
  DeviceAvailability c_now;       // c's events at R's start were 0
};

const Case kCases[] = {
    {"1: a failed and restarted before R started", 2, {2}, {2, true}, {0, true}},
    {"2: a failed and restarted after R started, before its command on a", 0, {2}, {2, true}, {0, true}},
    {"3: a failed and restarted between R's two commands on a", 0, {0, 2}, {2, true}, {0, true}},
    {"4: a failed after R's last command on a, back by R's finish", 0, {0}, {2, true}, {0, true}},
    {"5: a failed after R's last command on a, still down at R's finish", 0, {0}, {1, false}, {0, true}},
    {"6: c, which R does not touch, failed and restarted while R ran", 0, {0}, {0, true}, {2, true}},
};

FinishCheck finish_check(Visibility visibility, const Case& c) {
  const std::map<std::string, DeviceAvailability> at_start{
      {"a", {c.a_at_start, true}}, {"b", {0, true}}, {"c", {0, true}}};
  const std::map<std::string, DeviceAvailability> now{{"a", c.a_now}, {"b", {0, true}}, {"c", c.c_now}};
  FinishCheck check;
  check.visibility = visibility;
  std::map<std::string, DeviceAvailability> watched_at_start;
  for (const auto& [device, availability] : now) {
    const bool watched = watched_devices(visibility) == WatchedDevices::all ||
                         (watched_devices(visibility) == WatchedDevices::locked && device != "c");
    if (!watched) continue;
    watched_at_start[device] = at_start.at(device);
    check.watched_now[device] = availability;
  }
  if (watched_devices(visibility) != WatchedDevices::none) check.baseline = make_baseline(watched_at_start);
  check.touches["a"] = c.a_touches;
  check.touches["b"] = {0};
  check.touched_now = {{"a", c.a_now}, {"b", {0, true}}};
  return check;
}

void expect_aborts(Visibility visibility, const std::set<int>& aborted_cases) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const auto reason = failure_abort_reason(finish_check(visibility, kCases[i]));
    const bool expected = aborted_cases.count(static_cast<int>(i) + 1) != 0;
    EXPECT_EQ(reason.has_value(), expected)
        << to_string(visibility) << ", case " << kCases[i].name << ": " << reason.value_or("completes");
  }
}

TEST(FailureSerialization, WeakVisibilityNeverAborts) { expect_aborts(Visibility::wv, {}); }
TEST(FailureSerialization, GsvAbortsOnEventsOfItsDevicesWhileItRuns) { expect_aborts(Visibility::gsv, {2, 3, 4, 5}); }
TEST(FailureSerialization, StrongGsvAbortsOnEventsOfAnyDeviceWhileItRuns) {
  expect_aborts(Visibility::sgsv, {2, 3, 4, 5, 6});
}
TEST(FailureSerialization, PsvAbortsWhenAnEventFallsInsideItsUseOrTheDeviceIsStillDown) {
  expect_aborts(Visibility::psv, {3, 5});
}
TEST(FailureSerialization, EvAbortsOnlyWhenAnEventFallsBetweenItsCommandsOnTheDevice) {
  expect_aborts(Visibility::ev, {3});
}

TEST(FailureSerialization, ReasonsNameTheDeviceAndTheRule) {
  const auto gsv = failure_abort_reason(finish_check(Visibility::gsv, kCases[4]));
  ASSERT_TRUE(gsv);
  EXPECT_NE(gsv->find("device a failed while the routine ran"), std::string::npos) << *gsv;
  EXPECT_NE(gsv->find("GSV"), std::string::npos) << *gsv;
  const auto restarted = failure_abort_reason(finish_check(Visibility::sgsv, kCases[5]));
  ASSERT_TRUE(restarted);
  EXPECT_NE(restarted->find("device c failed and restarted"), std::string::npos) << *restarted;
  const auto between = failure_abort_reason(finish_check(Visibility::psv, kCases[2]));
  ASSERT_TRUE(between);
  EXPECT_NE(between->find("between two of the routine's commands"), std::string::npos) << *between;
  const auto down = failure_abort_reason(finish_check(Visibility::psv, kCases[4]));
  ASSERT_TRUE(down);
  EXPECT_NE(down->find("still down at its finish"), std::string::npos) << *down;
}

TEST(FailureSerialization, WithoutABaselineOnlyTheTouchesRuleApplies) {
  // An invocation that was executing before its leader could commit a
  // baseline (an older agent) is checked as PSV checks it.
  FinishCheck check = finish_check(Visibility::gsv, kCases[3]);
  check.baseline.reset();
  EXPECT_FALSE(failure_abort_reason(check));
  check = finish_check(Visibility::gsv, kCases[4]);
  check.baseline.reset();
  EXPECT_TRUE(failure_abort_reason(check));
}

TEST(FailureSerialization, ManyWatchedDevicesKeepOnlyADigestAndStillCatchAnEvent) {
  std::map<std::string, DeviceAvailability> start;
  for (size_t i = 0; i < kMaxNamedBaselineDevices + 10; ++i) start["d" + std::to_string(100 + i)] = {1, true};
  const AvailabilityBaseline baseline = make_baseline(start);
  EXPECT_TRUE(baseline.events.empty());
  EXPECT_EQ(baseline.devices, start.size());
  FinishCheck check;
  check.visibility = Visibility::sgsv;
  check.baseline = from_proto(to_proto(baseline));
  check.watched_now = start;
  EXPECT_FALSE(failure_abort_reason(check));
  check.watched_now["d105"] = {2, false};
  const auto reason = failure_abort_reason(check);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("down now: d105"), std::string::npos) << *reason;
}

TEST(FailureSerialization, AChangedDeviceListAbortsRatherThanGuess) {
  std::map<std::string, DeviceAvailability> start{{"a", {0, true}}, {"b", {0, true}}};
  FinishCheck check;
  check.visibility = Visibility::sgsv;
  check.baseline = make_baseline(start);
  check.watched_now = start;
  check.watched_now["new"] = {0, true};
  const auto reason = failure_abort_reason(check);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("2 at its start, 3 now"), std::string::npos) << *reason;
}

TEST(FailureSerialization, BaselineRoundTripsAndDigestsTheCounts) {
  const AvailabilityBaseline a = make_baseline({{"a", {3, true}}, {"b", {0, false}}});
  const AvailabilityBaseline b = make_baseline({{"a", {4, true}}, {"b", {0, false}}});
  EXPECT_NE(a.digest, b.digest);
  const AvailabilityBaseline copy = from_proto(to_proto(a));
  EXPECT_EQ(copy.digest, a.digest);
  EXPECT_EQ(copy.devices, 2u);
  EXPECT_EQ(copy.events, (std::vector<uint64_t>{3, 0}));
}

}  // namespace
}  // namespace mesh::routine
