#include "routine/device_model.h"

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

DeviceSpec dimmer() {
  DeviceSpec spec;
  spec.id = "hall_light";
  spec.kind = DeviceKind::dimmer;
  spec.driver = "kasa://10.0.0.7";
  return spec;
}

TEST(DeviceModel, EveryKindRoundTripsByName) {
  for (DeviceKind kind : all_kinds()) {
    const auto parsed = parse_kind(to_string(kind));
    ASSERT_TRUE(parsed) << to_string(kind);
    EXPECT_EQ(*parsed, kind);
    EXPECT_FALSE(schema(kind).empty()) << to_string(kind);
  }
  EXPECT_FALSE(parse_kind("toaster"));
  EXPECT_EQ(to_string(DeviceKind::switch_), "switch");
}

TEST(DeviceModel, DeviceIds) {
  EXPECT_FALSE(check_device_id("hall_light.1-a"));
  EXPECT_TRUE(check_device_id(""));
  EXPECT_TRUE(check_device_id("Hall"));
  EXPECT_TRUE(check_device_id("hall light"));
  EXPECT_TRUE(check_device_id(std::string(kMaxDeviceIdLength + 1, 'a')));
  EXPECT_NE(check_device_id("a/b")->find("'/'"), std::string::npos);
}

TEST(DeviceModel, ParsesValuesPerType) {
  const auto* power = find_attribute(DeviceKind::plug, "power");
  ASSERT_NE(power, nullptr);
  EXPECT_EQ(std::get<bool>(*parse_value(*power, "on")), true);
  EXPECT_EQ(std::get<bool>(*parse_value(*power, "off")), false);
  EXPECT_FALSE(parse_value(*power, "true"));
  const auto* locked = find_attribute(DeviceKind::lock, "locked");
  EXPECT_EQ(std::get<bool>(*parse_value(*locked, "true")), true);
  EXPECT_FALSE(parse_value(*locked, "on"));
  const auto* brightness = find_attribute(DeviceKind::dimmer, "brightness");
  EXPECT_EQ(std::get<double>(*parse_value(*brightness, "30")), 30.0);
  EXPECT_FALSE(parse_value(*brightness, "30.5"));
  EXPECT_FALSE(parse_value(*brightness, "101"));
  EXPECT_FALSE(parse_value(*brightness, ""));
  EXPECT_FALSE(parse_value(*brightness, "3x"));
  const auto* target = find_attribute(DeviceKind::thermostat, "target");
  EXPECT_EQ(std::get<double>(*parse_value(*target, "21.5")), 21.5);
  const auto error = parse_value(*brightness, "150");
  EXPECT_EQ(error.error(), "brightness=150 is out of range: allowed is an integer 0..100");
}

TEST(DeviceModel, CommandErrorsNameDeviceAttributeAndWhatIsAllowed) {
  EXPECT_FALSE(check_command(dimmer(), {{"power", true}, {"brightness", 30.0}}));
  EXPECT_EQ(*check_command(dimmer(), {{"brightness", 150.0}}),
            "device hall_light: brightness=150 is not allowed: allowed is an integer 0..100");
  EXPECT_EQ(*check_command(dimmer(), {{"colour", 1.0}}),
            "device hall_light: a dimmer has no attribute 'colour' (it has: power, brightness)");
  EXPECT_EQ(*check_command(dimmer(), {{"power", 1.0}}),
            "device hall_light: power=1 is not allowed: allowed is on or off");
  EXPECT_TRUE(check_command(dimmer(), {}));
  DeviceSpec sensor;
  sensor.id = "hall_motion";
  sensor.kind = DeviceKind::motion_sensor;
  EXPECT_EQ(*check_command(sensor, {{"motion", true}}), "device hall_motion: motion is a reading and cannot be set");
}

TEST(DeviceModel, SanitizeDropsWhatTheSchemaDoesNotAllow) {
  Attributes state{{"power", true}, {"brightness", 300.0}, {"voltage", 230.0}};
  const auto dropped = sanitize_state(DeviceKind::dimmer, state);
  EXPECT_EQ(state, (Attributes{{"power", true}}));
  EXPECT_EQ(dropped.size(), 2u);
}

TEST(DeviceModel, Formats) {
  EXPECT_EQ(format_attributes(DeviceKind::dimmer, {{"power", true}, {"brightness", 30.0}}), "brightness=30 power=on");
  EXPECT_EQ(format_attributes(DeviceKind::lock, {{"locked", false}}), "locked=false");
  EXPECT_EQ(format_value(Value{21.5}), "21.5");
}

}  // namespace
}  // namespace mesh::routine
