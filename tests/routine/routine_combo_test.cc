// Routines run as APEX combos (routine/routine_combo.h): which devices an
// invocation reserves, which precondition commands it deduces from the
// states it reads once every lock is held, and where each runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "routine/catalog.h"
#include "tests/support/device_specs.h"
#include "routine/routine_combo.h"

namespace mesh::routine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test_support::device_spec;

RoutineCommand set(const std::string& device, bool power) {
  return {device, {{"power", power}}, std::nullopt, true, {}};
}

RoutineSpec routine(std::vector<RoutineCommand> commands) {
  RoutineSpec spec;
  spec.id = "garden";
  spec.trigger_text = "manual";
  spec.trigger = build_trigger("manual", "", {}).value();
  spec.commands = std::move(commands);
  return spec;
}

// The README's garden: the sprinkler sprays only with both outlets off, and
// outlet_1 goes off only with nobody in the hall.
Catalog garden(std::vector<PreconditionRuleSpec> rules) {
  Catalog catalog;
  catalog.set_base({device_spec("sprinkler", DeviceKind::switch_), device_spec("outlet_1", DeviceKind::plug),
                    device_spec("outlet_2", DeviceKind::plug), device_spec("hall_motion", DeviceKind::motion_sensor),
                    device_spec("lamp", DeviceKind::plug)},
                   "test", {}, std::move(rules));
  return catalog;
}

std::vector<PreconditionRuleSpec> garden_rules() {
  return {{"sprinkler_needs_outlets_off", "sprinkler.power == on", {"outlet_1.power == off", "outlet_2.power == off"}},
          {"outlet_1_off_when_hall_empty", "outlet_1.power == off", {"hall_motion.motion == off"}}};
}

TEST(RoutineCombo, WithoutRulesARoutineRunsAsWritten) {
  const Catalog catalog = garden({});
  const RoutineSpec spec = routine({set("sprinkler", true), set("lamp", false)});
  const auto reservation = combo_devices(spec, catalog);
  ASSERT_TRUE(reservation) << reservation.error();
  EXPECT_FALSE(reservation->has_preconditions);
  EXPECT_EQ(reservation->devices, (std::set<std::string>{"lamp", "sprinkler"}));
  const auto plan = plan_preconditions(spec, catalog, {}, {});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_TRUE(plan->empty());
  const auto commands = expand(spec, *plan);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].command, spec.commands[0]);
  EXPECT_FALSE(commands[0].serves);
}

TEST(RoutineCombo, ReservesEveryDeviceOfEveryGraphReadingsIncluded) {
  const Catalog catalog = garden(garden_rules());
  const RoutineSpec spec = routine({set("lamp", true), set("sprinkler", true)});
  const auto reservation = combo_devices(spec, catalog);
  ASSERT_TRUE(reservation) << reservation.error();
  EXPECT_TRUE(reservation->has_preconditions);
  EXPECT_EQ(reservation->devices,
            (std::set<std::string>{"hall_motion", "lamp", "outlet_1", "outlet_2", "sprinkler"}));
}

TEST(RoutineCombo, SetsOnlyThePreconditionsThatDoNotHoldAndPlacesThemBeforeTheirCommand) {
  const Catalog catalog = garden(garden_rules());
  const RoutineSpec spec = routine({set("lamp", true), set("sprinkler", true)});
  const DeviceStates states = {{"outlet_1", {{"power", true}}},
                               {"outlet_2", {{"power", false}}},
                               {"hall_motion", {{"motion", false}}},
                               {"sprinkler", {{"power", false}}}};
  const auto plan = plan_preconditions(spec, catalog, states, {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].before, 1u);
  EXPECT_EQ((*plan)[0].device, "outlet_1");
  EXPECT_EQ((*plan)[0].values, (Attributes{{"power", false}}));
  EXPECT_THAT((*plan)[0].rules, ElementsAre("sprinkler_needs_outlets_off"));

  const auto commands = expand(spec, *plan);
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(commands[0].command.device, "lamp");
  EXPECT_EQ(commands[1].command.device, "outlet_1");
  EXPECT_EQ(commands[1].serves, 1u);
  EXPECT_TRUE(commands[1].command.must);
  EXPECT_EQ(commands[2].command.device, "sprinkler");
  EXPECT_FALSE(commands[2].serves);

  // The plan travels as a committed step and comes back the same.
  EXPECT_EQ(from_proto(to_proto(*plan)), *plan);
}

TEST(RoutineCombo, UnknownStatesAreSetInPegOrder) {
  const Catalog catalog = garden(garden_rules());
  const RoutineSpec spec = routine({set("sprinkler", true)});
  // The hall sensor is known (a reading cannot be set), the outlets not.
  const auto plan = plan_preconditions(spec, catalog, {{"hall_motion", {{"motion", false}}}}, {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->size(), 2u);
  std::set<std::string> devices = {(*plan)[0].device, (*plan)[1].device};
  EXPECT_EQ(devices, (std::set<std::string>{"outlet_1", "outlet_2"}));
  EXPECT_EQ((*plan)[0].before, 0u);
  EXPECT_EQ((*plan)[1].before, 0u);
}

// Commands of one stage of one graph have no order among them (apex.md
// §6.2): they form a run that goes out at once. A deeper precondition stays
// before them, and the run survives the committed plan's encoding.
TEST(RoutineCombo, IndependentPreconditionsFormARunThatSurvivesTheCommittedPlan) {
  auto rules = garden_rules();
  rules.push_back({"outlet_2_off_needs_lamp_off", "outlet_2.power == off", {"lamp.power == off"}});
  const Catalog catalog = garden(rules);
  const RoutineSpec spec = routine({set("sprinkler", true)});
  const DeviceStates states = {{"outlet_1", {{"power", true}}},
                               {"outlet_2", {{"power", true}}},
                               {"lamp", {{"power", true}}},
                               {"hall_motion", {{"motion", false}}}};
  const auto plan = plan_preconditions(spec, catalog, states, {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[0].device, "lamp");
  EXPECT_FALSE((*plan)[0].with_previous);
  EXPECT_EQ((std::set<std::string>{(*plan)[1].device, (*plan)[2].device}),
            (std::set<std::string>{"outlet_1", "outlet_2"}));
  EXPECT_FALSE((*plan)[1].with_previous);
  EXPECT_TRUE((*plan)[2].with_previous);

  const auto commands = expand(spec, *plan);
  ASSERT_EQ(commands.size(), 4u);
  EXPECT_TRUE(commands[2].with_previous);
  EXPECT_FALSE(commands[3].with_previous);  // the sprinkler waits for both

  const proto::PreconditionPlanMsg msg = to_proto(*plan);
  EXPECT_THAT(msg.runs(), ElementsAre(1u, 2u));
  EXPECT_EQ(from_proto(msg), *plan);

  // Run lengths that do not cover the commands say nothing: one by one.
  proto::PreconditionPlanMsg short_runs = msg;
  short_runs.set_runs(1, 1);
  for (const auto& command : from_proto(short_runs)) EXPECT_FALSE(command.with_previous) << command.device;
  // Nor does a run join two commands on one device, or of two routine
  // commands.
  proto::PreconditionPlanMsg same_device = msg;
  same_device.mutable_commands(2)->set_device(same_device.commands(1).device());
  EXPECT_FALSE(from_proto(same_device)[2].with_previous);
  proto::PreconditionPlanMsg two_commands = msg;
  two_commands.mutable_commands(2)->set_before(1);
  EXPECT_FALSE(from_proto(two_commands)[2].with_previous);
  // Every command alone: no run lengths at all (old plans read the same).
  EXPECT_EQ(to_proto(std::vector<PreconditionCommand>{(*plan)[0]}).runs_size(), 0);
}

TEST(RoutineCombo, AnEarlierCommandsEffectCountsForALaterPrecondition) {
  const Catalog catalog = garden(garden_rules());
  // The routine turns outlet_1 off itself before the sprinkler: only
  // outlet_2 (on) needs a precondition command.
  const RoutineSpec spec = routine({set("outlet_1", false), set("sprinkler", true)});
  const DeviceStates states = {{"outlet_1", {{"power", true}}},
                               {"outlet_2", {{"power", true}}},
                               {"hall_motion", {{"motion", false}}}};
  const auto plan = plan_preconditions(spec, catalog, states, {});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].device, "outlet_2");
  EXPECT_EQ((*plan)[0].before, 1u);
}

// The aggressive strategy holds and plans one routine command's stage at a
// time: its devices are that command's graph's, and its plan is what the
// whole plan would hold for it, from the states as the stage begins.
TEST(RoutineCombo, StagesReserveAndPlanOneCommandAtATime) {
  const Catalog catalog = garden(garden_rules());
  const RoutineSpec spec = routine({set("lamp", true), set("outlet_1", false), set("sprinkler", true)});
  const auto first = stage_devices(spec, catalog, 0);
  ASSERT_TRUE(first) << first.error();
  EXPECT_FALSE(first->has_preconditions);
  EXPECT_EQ(first->devices, (std::set<std::string>{"lamp"}));
  const auto second = stage_devices(spec, catalog, 1);
  ASSERT_TRUE(second) << second.error();
  EXPECT_TRUE(second->has_preconditions);
  EXPECT_EQ(second->devices, (std::set<std::string>{"hall_motion", "outlet_1"}));
  const auto third = stage_devices(spec, catalog, 2);
  ASSERT_TRUE(third) << third.error();
  EXPECT_EQ(third->devices, (std::set<std::string>{"hall_motion", "outlet_1", "outlet_2", "sprinkler"}));

  const DeviceStates at_start = {
      {"outlet_1", {{"power", true}}}, {"outlet_2", {{"power", true}}}, {"hall_motion", {{"motion", false}}}};
  const auto whole = plan_preconditions(spec, catalog, at_start, {});
  ASSERT_TRUE(whole) << whole.error();
  // When the sprinkler's stage begins, the routine has turned outlet_1 off.
  DeviceStates at_third = at_start;
  at_third["outlet_1"]["power"] = false;
  const auto staged = plan_stage(spec, catalog, 2, at_third, {});
  ASSERT_TRUE(staged) << staged.error();
  std::vector<PreconditionCommand> of_third;
  for (const auto& command : *whole) {
    if (command.before == 2) of_third.push_back(command);
  }
  EXPECT_EQ(*staged, of_third);
  ASSERT_EQ(staged->size(), 1u);
  EXPECT_EQ((*staged)[0].device, "outlet_2");
  EXPECT_TRUE(plan_stage(spec, catalog, 0, at_start, {})->empty());
  EXPECT_TRUE(plan_stage(spec, catalog, 3, at_start, {})->empty());  // no such command
}

TEST(RoutineCombo, AReadingThatDoesNotHoldOrCannotBeReadIsAnError) {
  const Catalog catalog = garden(garden_rules());
  const RoutineSpec spec = routine({set("sprinkler", true)});
  const auto occupied = plan_preconditions(spec, catalog, {{"hall_motion", {{"motion", true}}}}, {});
  ASSERT_FALSE(occupied);
  EXPECT_THAT(occupied.error(), HasSubstr("hall_motion.motion"));
  const auto unread = plan_preconditions(spec, catalog, {}, {});
  ASSERT_FALSE(unread);
  EXPECT_THAT(unread.error(), HasSubstr("hall_motion.motion could not be read"));
}

TEST(RoutineCombo, ConflictingRulesNameTheCommand) {
  auto rules = garden_rules();
  rules.push_back({"lamp_needs_outlet_1_on", "lamp.power == on", {"outlet_1.power == on"}});
  rules.push_back({"lamp_needs_sprinkler", "sprinkler.power == on", {"lamp.power == on"}});
  const Catalog catalog = garden(rules);
  ASSERT_TRUE(catalog.precondition_problems().empty());
  const auto reservation = combo_devices(routine({set("lamp", false), set("sprinkler", true)}), catalog);
  ASSERT_FALSE(reservation);
  EXPECT_THAT(reservation.error(), HasSubstr("command 2"));
}

}  // namespace
}  // namespace mesh::routine
