#pragma once

// The agent's routine::DriverFactory: opens a device's driver from the
// scheme of its URI.
//
//   kasa://HOST[:PORT][?child=ID&timeout_ms=MS&transition_ms=MS]   kasa_driver.h
//   z2m://BROKER[:PORT]/BASE/NAME[?OPTIONS]                         mqtt_driver.h
//   tasmota://BROKER[:PORT]/TOPIC[?OPTIONS]                         mqtt_driver.h
//
// Usage, on the agent's event loop:
//   asio::io_context io;
//   mesh::drivers::AgentDriverFactory factory(io);
//   auto driver = factory.open(spec);   // Expected<unique_ptr<DeviceDriver>, string>
// The factory must outlive the drivers it opened only as far as the MQTT
// broker connections go: drivers hold their connection themselves, so either
// order of destruction is safe; `io` must outlive both.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>

#include "routine/device_driver.h"

namespace mesh::drivers {

class MqttBrokers;

class AgentDriverFactory final : public routine::DriverFactory {
 public:
  explicit AgentDriverFactory(asio::io_context& io);
  AgentDriverFactory(const AgentDriverFactory&) = delete;
  AgentDriverFactory& operator=(const AgentDriverFactory&) = delete;
  ~AgentDriverFactory() override;

  // An error names the device, the URI and what is wrong; an unknown scheme
  // lists the known ones.
  core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> open(const routine::DeviceSpec& device) override;

  // The schemes open() knows, in the order errors list them.
  static const std::vector<std::string_view>& schemes();

  // The shared MQTT broker connections (one per broker and credentials).
  MqttBrokers& brokers() { return *brokers_; }

 private:
  asio::io_context& io_;
  std::unique_ptr<MqttBrokers> brokers_;
};

}  // namespace mesh::drivers
