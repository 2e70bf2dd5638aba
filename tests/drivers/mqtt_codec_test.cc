#include "agent/drivers/mqtt_codec.h"

#include <gtest/gtest.h>

namespace mesh::drivers::mqtt {
namespace {

using routine::Attributes;
using routine::DeviceKind;

Device z2m(DeviceKind kind) { return {Flavor::z2m, kind, "zigbee2mqtt", "hall"}; }
Device tasmota(DeviceKind kind) { return {Flavor::tasmota, kind, "", "sonoff"}; }

TEST(Z2m, Topics) {
  EXPECT_EQ(subscriptions(z2m(DeviceKind::bulb)),
            (std::vector<std::string>{"zigbee2mqtt/hall", "zigbee2mqtt/hall/availability"}));
  EXPECT_EQ(read_request(z2m(DeviceKind::bulb)),
            (std::vector<Message>{{"zigbee2mqtt/hall/get", R"({"brightness":"","color_temp":"","state":""})"}}));
  EXPECT_TRUE(read_request(z2m(DeviceKind::motion_sensor)).empty());
}

TEST(Z2m, StateOfEveryKind) {
  auto state = [](DeviceKind kind, std::string_view payload) {
    auto update = parse_message(z2m(kind), "zigbee2mqtt/hall", payload);
    EXPECT_FALSE(update.error) << payload;
    return update.state.value_or(Attributes{});
  };
  EXPECT_EQ(state(DeviceKind::bulb, R"({"state":"ON","brightness":254,"color_temp":370,"linkquality":80})"),
            (Attributes{{"power", true}, {"brightness", 100.0}, {"color_temp", 2703.0}}));
  EXPECT_EQ(state(DeviceKind::dimmer, R"({"state":"OFF","brightness":127})"),
            (Attributes{{"power", false}, {"brightness", 50.0}}));
  EXPECT_EQ(state(DeviceKind::plug, R"({"state":"ON","power":12.5})"), (Attributes{{"power", true}}));
  EXPECT_EQ(state(DeviceKind::motion_sensor, R"({"occupancy":true,"battery":90})"), (Attributes{{"motion", true}}));
  EXPECT_EQ(state(DeviceKind::occupancy_sensor, R"({"presence":false})"), (Attributes{{"occupancy", false}}));
  EXPECT_EQ(state(DeviceKind::contact_sensor, R"({"contact":false})"), (Attributes{{"contact", false}}));
  EXPECT_EQ(
      state(DeviceKind::sensor, R"({"temperature":21.5,"humidity":40.2,"illuminance":17000,"illuminance_lux":50})"),
      (Attributes{{"temperature", 21.5}, {"humidity", 40.2}, {"illuminance", 50.0}}));
  EXPECT_EQ(state(DeviceKind::lock, R"({"state":"LOCK","lock_state":"unlocked"})"), (Attributes{{"locked", false}}));
  EXPECT_EQ(state(DeviceKind::thermostat, R"({"current_heating_setpoint":21,"local_temperature":19.5})"),
            (Attributes{{"target", 21.0}, {"temperature", 19.5}}));
  // Wrong types are ignored, not thrown.
  EXPECT_EQ(state(DeviceKind::bulb, R"({"state":1,"brightness":"x","color_temp":0})"), Attributes{});
}

TEST(Z2m, AvailabilityAndBadPayloads) {
  const auto device = z2m(DeviceKind::plug);
  EXPECT_EQ(parse_message(device, "zigbee2mqtt/hall/availability", "online").online, true);
  EXPECT_EQ(parse_message(device, "zigbee2mqtt/hall/availability", R"({"state":"offline"})").online, false);
  EXPECT_TRUE(parse_message(device, "zigbee2mqtt/hall/availability", "maybe").error);
  EXPECT_TRUE(parse_message(device, "zigbee2mqtt/hall", "not json").error);
  EXPECT_TRUE(parse_message(device, "zigbee2mqtt/hall", "[1,2]").error);
  EXPECT_TRUE(parse_message(device, "zigbee2mqtt/hall", std::string(1000, '[')).error);
  const auto other = parse_message(device, "zigbee2mqtt/other", R"({"state":"ON"})");
  EXPECT_FALSE(other.state || other.online || other.error);
}

TEST(Z2m, Commands) {
  auto messages =
      command_messages(z2m(DeviceKind::bulb), {{"power", true}, {"brightness", 50.0}, {"color_temp", 2700.0}});
  ASSERT_TRUE(messages) << messages.error();
  EXPECT_EQ(*messages,
            (std::vector<Message>{{"zigbee2mqtt/hall/set", R"({"brightness":127,"color_temp":370,"state":"ON"})"}}));
  EXPECT_EQ(*command_messages(z2m(DeviceKind::lock), {{"locked", true}}),
            (std::vector<Message>{{"zigbee2mqtt/hall/set", R"({"state":"LOCK"})"}}));
  EXPECT_EQ(*command_messages(z2m(DeviceKind::thermostat), {{"target", 21.5}}),
            (std::vector<Message>{{"zigbee2mqtt/hall/set", R"({"current_heating_setpoint":21.5})"}}));
  EXPECT_FALSE(command_messages(z2m(DeviceKind::motion_sensor), {{"motion", true}}));
  EXPECT_FALSE(command_messages(z2m(DeviceKind::plug), {{"brightness", 3.0}}));
  EXPECT_FALSE(command_messages(z2m(DeviceKind::plug), {}));
}

TEST(Tasmota, TopicsAndMessages) {
  const auto plug = tasmota(DeviceKind::plug);
  EXPECT_EQ(subscriptions(plug).size(), 6u);
  EXPECT_EQ(read_request(plug), (std::vector<Message>{{"cmnd/sonoff/STATE", ""}}));
  EXPECT_EQ(read_request(tasmota(DeviceKind::sensor)), (std::vector<Message>{{"cmnd/sonoff/STATUS", "10"}}));
  EXPECT_EQ(parse_message(plug, "stat/sonoff/POWER", "ON").state, (Attributes{{"power", true}}));
  EXPECT_TRUE(parse_message(plug, "stat/sonoff/POWER", "MAYBE").error);
  EXPECT_EQ(parse_message(plug, "tele/sonoff/LWT", "Offline").online, false);
  EXPECT_EQ(
      parse_message(tasmota(DeviceKind::bulb), "stat/sonoff/RESULT", R"({"POWER":"OFF","Dimmer":40,"CT":250})").state,
      (Attributes{{"power", false}, {"brightness", 40.0}, {"color_temp", 4000.0}}));
  EXPECT_EQ(
      parse_message(tasmota(DeviceKind::sensor), "tele/sonoff/SENSOR",
                    R"({"Time":"2026-11-25T01:00:00","AM2301":{"Temperature":21.5,"Humidity":40},"TempUnit":"C"})")
          .state,
      (Attributes{{"temperature", 21.5}, {"humidity", 40.0}}));
  EXPECT_EQ(parse_message(tasmota(DeviceKind::sensor), "stat/sonoff/STATUS10",
                          R"({"StatusSNS":{"BH1750":{"Illuminance":320}}})")
                .state,
            (Attributes{{"illuminance", 320.0}}));
  EXPECT_EQ(parse_message(tasmota(DeviceKind::motion_sensor), "tele/sonoff/SENSOR", R"({"Switch1":"ON"})").state,
            (Attributes{{"motion", true}}));
  EXPECT_EQ(
      *command_messages(tasmota(DeviceKind::bulb), {{"power", false}, {"brightness", 30.0}, {"color_temp", 4000.0}}),
      (std::vector<Message>{{"cmnd/sonoff/Dimmer", "30"}, {"cmnd/sonoff/CT", "250"}, {"cmnd/sonoff/POWER", "OFF"}}));
  EXPECT_FALSE(command_messages(tasmota(DeviceKind::lock), {{"locked", true}}));
}

}  // namespace
}  // namespace mesh::drivers::mqtt
