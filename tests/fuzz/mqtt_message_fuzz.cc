// MQTT device messages: whatever a device (or anyone with access to the
// broker) publishes on a device's topics is parsed for every kind under both
// conventions. Nothing may crash the agent; what is accepted has the model's
// attribute types.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "agent/drivers/mqtt_codec.h"
#include "routine/device_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using mesh::drivers::mqtt::Device;
  using mesh::drivers::mqtt::Flavor;
  // The first byte picks the topic; the rest is the payload.
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  for (auto kind : mesh::routine::all_kinds()) {
    for (auto flavor : {Flavor::z2m, Flavor::tasmota}) {
      const Device device{flavor, kind, "zigbee2mqtt", "dev"};
      const auto topics = mesh::drivers::mqtt::subscriptions(device);
      const auto& topic = topics[data[0] % topics.size()];
      const auto update = mesh::drivers::mqtt::parse_message(device, topic, payload);
      if (!update.state) continue;
      for (const auto& [name, value] : *update.state) {
        const auto* spec = mesh::routine::find_attribute(kind, name);
        if (spec == nullptr) std::abort();
        if ((spec->type == mesh::routine::AttributeType::number) == std::holds_alternative<bool>(value)) std::abort();
      }
    }
  }
  return 0;
}
