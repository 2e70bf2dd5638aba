#include "agent/drivers/driver_factory.h"

#include <fmt/format.h>

#include "agent/drivers/driver_uri.h"
#include "agent/drivers/kasa_driver.h"
#include "agent/drivers/mqtt_connection.h"
#include "agent/drivers/mqtt_driver.h"

namespace mesh::drivers {

AgentDriverFactory::AgentDriverFactory(asio::io_context& io) : io_(io), brokers_(std::make_unique<MqttBrokers>(io)) {}

AgentDriverFactory::~AgentDriverFactory() = default;

const std::vector<std::string_view>& AgentDriverFactory::schemes() {
  static const std::vector<std::string_view> kKnown = {"kasa", "z2m", "tasmota"};
  return kKnown;
}

core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> AgentDriverFactory::open(
    const routine::DeviceSpec& device) {
  auto uri = parse_driver_uri(device.driver);
  if (!uri) return core::Unexpected(fmt::format("device {}: {}", device.id, uri.error()));
  if (uri->scheme == "kasa") {
    auto driver = KasaDriver::open(io_, device, *uri);
    if (!driver) return core::Unexpected(driver.error());
    return std::unique_ptr<routine::DeviceDriver>(std::move(*driver));
  }
  if (uri->scheme == "z2m" || uri->scheme == "tasmota") {
    auto driver = MqttDriver::open(io_, *brokers_, device, *uri);
    if (!driver) return core::Unexpected(driver.error());
    return std::unique_ptr<routine::DeviceDriver>(std::move(*driver));
  }
  return core::Unexpected(fmt::format("device {}: driver URI '{}': unknown scheme '{}' (known: {})", device.id,
                                      device.driver, uri->scheme, fmt::join(schemes(), ", ")));
}

}  // namespace mesh::drivers
