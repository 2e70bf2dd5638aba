#include "routine/routine_model.h"

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

DeviceSpec device(const std::string& id, DeviceKind kind) {
  DeviceSpec spec;
  spec.id = id;
  spec.kind = kind;
  spec.location = {1, 1, 0};
  spec.driver = "emulated://" + id;
  return spec;
}

DeviceCatalog catalog() {
  return {{"hall_motion", device("hall_motion", DeviceKind::motion_sensor)},
          {"hall_light", device("hall_light", DeviceKind::dimmer)},
          {"sprinkler", device("sprinkler", DeviceKind::plug)}};
}

RoutineSpec night_hall() {
  RoutineSpec spec;
  spec.id = "night_hall";
  spec.trigger_text = "hall_motion.motion == on";
  spec.trigger = *build_trigger(spec.trigger_text, "22:00-06:00", {"mon..fri"});
  spec.commands.push_back({"hall_light", {{"power", true}, {"brightness", 30.0}}, std::chrono::minutes(5), true, {}});
  spec.commands.push_back({"sprinkler", {{"power", false}}, std::nullopt, false, {}});
  spec.uses = {"pump"};
  spec.lock_strategy = LockStrategy::sla;
  return spec;
}

TEST(RoutineModel, DefaultsFollowCoMesh) {
  const RoutineSpec spec;
  EXPECT_EQ(spec.min_retrigger, std::chrono::seconds(10));
  EXPECT_TRUE(spec.enabled);
  EXPECT_EQ(spec.lock_strategy, LockStrategy::mesh_default);
  EXPECT_TRUE(RoutineCommand{}.must);
}

TEST(RoutineModel, ProtoRoundTrip) {
  const RoutineSpec spec = night_hall();
  ASSERT_FALSE(check(spec, catalog())) << *check(spec, catalog());
  const proto::RoutineSpecMsg msg = to_proto(spec);
  EXPECT_EQ(msg.window(), "22:00-06:00");
  EXPECT_EQ(msg.days_size(), 5);
  EXPECT_EQ(msg.commands(0).duration_ms(), 300000u);
  EXPECT_TRUE(msg.commands(1).best_effort());
  EXPECT_EQ(msg.lock_strategy(), "sla");
  EXPECT_LT(msg.ByteSizeLong(), kMaxRoutineSpecBytes);
  const auto back = from_proto(msg);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, spec);
  RoutineSpec aggressive = spec;
  aggressive.lock_strategy = LockStrategy::aggressive;
  EXPECT_EQ(to_proto(aggressive).lock_strategy(), "aggressive");
  EXPECT_EQ(from_proto(to_proto(aggressive))->lock_strategy, LockStrategy::aggressive);
  EXPECT_EQ(back->trigger_text, spec.trigger_text);

  RoutineSpec manual;
  manual.id = "all_off";
  manual.trigger_text = "manual";
  manual.trigger = *build_trigger("manual", "", {});
  manual.commands.push_back({"hall_light", {{"power", false}}, std::nullopt, true, {}});
  manual.enabled = false;
  manual.min_retrigger = core::Duration::zero();
  const auto manual_back = from_proto(to_proto(manual));
  ASSERT_TRUE(manual_back) << manual_back.error();
  EXPECT_EQ(*manual_back, manual);
  EXPECT_TRUE(manual_back->trigger.days.every());
  EXPECT_FALSE(manual_back->trigger.window);
}

TEST(RoutineModel, EqualityIgnoresTriggerSpacing) {
  RoutineSpec spaced = night_hall();
  spaced.trigger_text = "hall_motion.motion==on";
  spaced.trigger = *build_trigger(spaced.trigger_text, "22:00-06:00", {"mon", "tue..fri"});
  EXPECT_EQ(spaced, night_hall());
  spaced.enabled = false;
  EXPECT_FALSE(spaced == night_hall());
}

TEST(RoutineModel, DecodingRefusesBadMessages) {
  const auto refused = [](void (*edit)(proto::RoutineSpecMsg&)) {
    proto::RoutineSpecMsg msg = to_proto(night_hall());
    edit(msg);
    const auto spec = from_proto(msg);
    return spec ? std::string("accepted") : spec.error();
  };
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_id("Night Hall"); }),
            "routine id 'Night Hall' has 'N': use lower-case letters, digits, '_', '.' and '-'");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_trigger("hall_motion.motion >="); }),
            "routine night_hall: trigger:1:22: expected a value after '>='; write a number, on, off, true, false or "
            "a \"quoted string\" (found the end of the trigger)");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_window("25:00-06:00"); }),
            "routine night_hall: window \"25:00-06:00\" is not HH:MM-HH:MM; write e.g. 22:00-06:00 (it wraps "
            "midnight) or 08:30-17:00");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.add_days("someday"); }),
            "routine night_hall: days: \"someday\" is not a day; write mon, tue, wed, thu, fri, sat or sun, or a "
            "range such as mon..fri");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.clear_commands(); }),
            "routine night_hall: it has no command; add at least one");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.mutable_commands(0)->clear_values(); }),
            "routine night_hall: command 1: device hall_light: a command must set at least one attribute");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.mutable_commands(1)->set_duration_ms(UINT64_MAX); }),
            "routine night_hall: command 2: a duration must be at most 86400000 ms");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_min_retrigger_ms(UINT64_MAX); }),
            "routine night_hall: min_retrigger must be at most 604800000 ms");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_lock_strategy("default"); }),
            "routine night_hall: unknown lock strategy 'default' (sla, ola or aggressive)");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.add_uses(""); }),
            "routine night_hall: a resource name in uses must not be empty");
  EXPECT_EQ(refused([](proto::RoutineSpecMsg& m) { m.set_trigger("manual"); }),
            "routine night_hall: a manual routine runs only on demand: remove its window and days");
}

TEST(RoutineModel, CheckAgainstTheCatalog) {
  EXPECT_FALSE(check(night_hall(), catalog()));
  RoutineSpec too_bright = night_hall();
  too_bright.commands[0].values["brightness"] = 150.0;
  EXPECT_EQ(check(too_bright, catalog()),
            "routine night_hall: command 1: device hall_light: brightness=150 is not allowed: allowed is an integer "
            "0..100");
  RoutineSpec unknown = night_hall();
  unknown.commands[1].device = "garden_tap";
  EXPECT_EQ(check(unknown, catalog()), "routine night_hall: command 2: no device garden_tap in the catalog");
  RoutineSpec sensor_write = night_hall();
  sensor_write.commands[1] = {"hall_motion", {{"motion", true}}, std::nullopt, true, {}};
  EXPECT_EQ(check(sensor_write, catalog()),
            "routine night_hall: command 2: device hall_motion: motion is a reading and cannot be set");
  RoutineSpec bad_trigger = night_hall();
  bad_trigger.trigger_text = "hall_motion.occupancy == on";
  bad_trigger.trigger = *build_trigger(bad_trigger.trigger_text, "22:00-06:00", {"mon..fri"});
  EXPECT_EQ(check(bad_trigger, catalog()),
            "routine night_hall: trigger:1:13: device hall_motion: a motion_sensor has no attribute 'occupancy' (it "
            "has: motion)");
  EXPECT_EQ(command_devices(night_hall()), (std::set<std::string>{"hall_light", "sprinkler"}));
  EXPECT_TRUE(names_device(night_hall(), "hall_motion"));
  EXPECT_TRUE(names_device(night_hall(), "sprinkler"));
  EXPECT_FALSE(names_device(night_hall(), "garden_tap"));
}

// A night_hall whose light command says what a rollback sets: dark, not
// whatever brightness the hall had.
RoutineSpec night_hall_with_undo() {
  RoutineSpec spec = night_hall();
  spec.commands[0].undo = {{"brightness", 0.0}};
  return spec;
}

TEST(RoutineModel, UndoValuesTravelAndChangeTheDefinition) {
  const RoutineSpec spec = night_hall_with_undo();
  ASSERT_FALSE(check(spec, catalog())) << *check(spec, catalog());
  const proto::RoutineSpecMsg msg = to_proto(spec);
  ASSERT_EQ(msg.commands(0).undo_size(), 1);
  EXPECT_EQ(msg.commands(0).undo(0).name(), "brightness");
  EXPECT_EQ(msg.commands(1).undo_size(), 0);
  EXPECT_LT(msg.ByteSizeLong(), kMaxRoutineSpecBytes);
  const auto back = from_proto(msg);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, spec);
  EXPECT_FALSE(*back == night_hall());

  proto::RoutineSpecMsg twice = msg;
  *twice.mutable_commands(0)->add_undo() = msg.commands(0).undo(0);
  const auto refused = from_proto(twice);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), "routine night_hall: command 1: an undo value is missing or set twice");
}

TEST(RoutineModel, AnUndoNamesOnlyAttributesItsCommandSets) {
  RoutineSpec spec = night_hall();
  spec.commands[1].undo = {{"brightness", 0.0}};
  const std::string expected =
      "routine night_hall: command 2: device sprinkler: undo sets 'brightness', which the command does not set; an "
      "undo replaces what a rollback restores of the command's own attributes: remove 'brightness' from undo or set "
      "it in the command too";
  EXPECT_EQ(check_definition(spec), expected);
  const auto decoded = from_proto(to_proto(spec));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error(), expected);
}

TEST(RoutineModel, UndoValuesAreCheckedAgainstTheDevice) {
  RoutineSpec too_bright = night_hall_with_undo();
  too_bright.commands[0].undo["brightness"] = 150.0;
  EXPECT_EQ(check(too_bright, catalog()),
            "routine night_hall: command 1: undo: device hall_light: brightness=150 is not allowed: allowed is an "
            "integer 0..100; give undo a value the device takes");
  RoutineSpec wrong_type = night_hall_with_undo();
  wrong_type.commands[0].undo["power"] = 3.0;
  EXPECT_EQ(check(wrong_type, catalog()),
            "routine night_hall: command 1: undo: device hall_light: power=3 is not allowed: allowed is on or off; "
            "give undo a value the device takes");
}

TEST(RoutineModel, RollbackSetsUndoValuesAndRestoresTheRestOfWhatTheCommandSet) {
  const RoutineCommand command = night_hall_with_undo().commands[0];  // power=on brightness=30, undo brightness=0
  // The user's value for brightness, the recorded one for power; nothing
  // the command did not set (level) is touched.
  EXPECT_EQ(rollback_values(command, {{"power", false}, {"brightness", 70.0}, {"level", 3.0}}),
            (Attributes{{"power", false}, {"brightness", 0.0}}));
  // The device's state was not known: the undo value alone.
  EXPECT_EQ(rollback_values(command, {}), (Attributes{{"brightness", 0.0}}));
  // Without an undo, the recorded values, and nothing when none is known.
  const RoutineCommand plain = night_hall().commands[0];
  EXPECT_EQ(rollback_values(plain, {{"power", false}, {"brightness", 70.0}}),
            (Attributes{{"power", false}, {"brightness", 70.0}}));
  EXPECT_TRUE(rollback_values(plain, {}).empty());
}

}  // namespace
}  // namespace mesh::routine
