#pragma once

// Topic and payload conventions of MQTT devices, without I/O: which topics a
// device publishes its state and availability on, what the payloads mean in
// the device model's attributes, and which messages command it.
//
// zigbee2mqtt (https://www.zigbee2mqtt.io/guide/usage/mqtt_topics_and_messages.html),
// device NAME under base topic BASE (default "zigbee2mqtt"):
//   BASE/NAME                 JSON state, e.g. {"state":"ON","brightness":127,"color_temp":370}
//   BASE/NAME/availability    "online" | "offline", or {"state":"online"}
//   BASE/NAME/set             commands, JSON: {"state":"OFF"}, {"brightness":254}
//   BASE/NAME/get             asks for the state: {"state":""}
// Attributes: power <- state "ON"/"OFF"; brightness <- brightness 0..254
// (scaled to 0..100); color_temp (K) <- color_temp (mired, K = 1e6 / mired);
// motion <- occupancy; occupancy <- occupancy or presence; contact <- contact
// (true = closed); temperature, humidity; illuminance <- illuminance_lux, else
// illuminance; lock: locked <- lock_state "locked"/"unlocked" or state
// "LOCK"/"UNLOCK", set with state "LOCK"/"UNLOCK"; thermostat: target <->
// current_heating_setpoint, temperature <- local_temperature.
//
// Tasmota (https://tasmota.github.io/docs/MQTT/), device topic TOPIC:
//   stat/TOPIC/POWER          "ON" | "OFF"
//   stat/TOPIC/RESULT         JSON after a command: {"POWER":"ON","Dimmer":40,"CT":327}
//   tele/TOPIC/STATE          JSON, periodic, same keys as RESULT
//   tele/TOPIC/SENSOR         JSON readings, per sensor: {"AM2301":{"Temperature":21.5,"Humidity":40}}
//   stat/TOPIC/STATUS10       {"StatusSNS":{...}}, the answer to cmnd/TOPIC/STATUS 10
//   tele/TOPIC/LWT            "Online" | "Offline"
//   cmnd/TOPIC/POWER ON|OFF, cmnd/TOPIC/Dimmer 0..100, cmnd/TOPIC/CT 153..500 (mired)
//   cmnd/TOPIC/STATE          asks for the state (answered on stat/TOPIC/RESULT)
// Attributes: power <- POWER (or POWER1); brightness <- Dimmer; color_temp <- CT;
// temperature, humidity, illuminance <- the first Temperature, Humidity,
// Illuminance found in a sensor's object; motion / contact / occupancy <-
// Switch1 "ON"/"OFF". Tasmota has no lock or thermostat convention.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"

namespace mesh::drivers::mqtt {

enum class Flavor { z2m, tasmota };

struct Device {
  Flavor flavor = Flavor::z2m;
  routine::DeviceKind kind = routine::DeviceKind::plug;
  std::string base;  // z2m base topic; unused for Tasmota
  std::string name;  // z2m friendly name, or the Tasmota topic
};

struct Message {
  std::string topic;
  std::string payload;
  friend bool operator==(const Message&, const Message&) = default;
};

// What one received message says about the device.
struct Update {
  std::optional<routine::Attributes> state;  // attributes it reports (may be a subset)
  std::optional<bool> online;                // availability / LWT
  std::optional<std::string> error;          // a payload that does not parse
};

// Every topic the driver subscribes to.
std::vector<std::string> subscriptions(const Device& device);
// Interprets a message on one of those topics (others: an empty update).
Update parse_message(const Device& device, const std::string& topic, std::string_view payload);
// The messages that set `values`, or what cannot be set.
core::Expected<std::vector<Message>, std::string> command_messages(const Device& device,
                                                                   const routine::Attributes& values);
// The messages that ask the device for its state.
std::vector<Message> read_request(const Device& device);

}  // namespace mesh::drivers::mqtt
