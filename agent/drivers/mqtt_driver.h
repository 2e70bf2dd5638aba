#pragma once

// An MQTT device (zigbee2mqtt or Tasmota conventions, mqtt_codec.h) as a push
// driver: watch() reports every state change and every loss of contact.
//
// URIs:
//   z2m://BROKER[:PORT]/BASE/NAME[?OPTIONS]     BASE may have several segments
//                                               (home/zigbee2mqtt/hall_light)
//   tasmota://BROKER[:PORT]/TOPIC[?OPTIONS]
// BROKER is an IP address (or a host name, see mqtt_connection.h); PORT
// defaults to 1883, or 8883 with TLS. OPTIONS (query, '&'-separated):
//   timeout_ms=MS         a read or an actuation, default 5000
//   qos=0|1               of commands, default 1
//   tls=1, ca=, cert=, key=, insecure=1, user=, password_file=, keepalive_s=
//                         the broker connection (mqtt_connection.h)
// e.g.
// z2m://10.0.0.2/zigbee2mqtt/hall_light?tls=1&ca=/etc/meshagent/ca.pem&user=mesh&password_file=/etc/meshagent/mqtt.pw
//
// Devices on the same broker with the same credentials share one connection.
//
// read(): the last state the device published, if any was received since the
// broker connection came up; otherwise it asks (z2m: BASE/NAME/get; Tasmota:
// cmnd/TOPIC/STATE, or STATUS 10 for sensors) and answers with the next state
// message, or timeout. A sensor that only reports on its own answers when it
// next reports.
// actuate(): publishes the command (QoS 1 by default) and succeeds with the
// first state message after it that reports one of the attributes set (its
// values are what the device reports); timeout if none comes in time.
// Unreachable: the broker connection is down, or the device's availability /
// LWT topic says offline.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <asio/io_context.hpp>

#include "agent/drivers/driver_uri.h"
#include "agent/drivers/mqtt_codec.h"
#include "agent/drivers/mqtt_connection.h"
#include "core/expected.h"
#include "routine/device_driver.h"

namespace mesh::drivers {

class MqttDriver final : public routine::DeviceDriver {
 public:
  struct Options {
    std::chrono::milliseconds timeout{5000};
    int qos = 1;
  };

  MqttDriver(asio::io_context& io, std::shared_ptr<MqttConnection> connection, mqtt::Device device, Options options);
  MqttDriver(const MqttDriver&) = delete;
  MqttDriver& operator=(const MqttDriver&) = delete;
  // Unsubscribes; no callback runs afterwards.
  ~MqttDriver() override;

  // Opens `device` from its parsed z2m:// or tasmota:// URI, sharing the
  // broker connection through `brokers`.
  static core::Expected<std::unique_ptr<MqttDriver>, std::string> open(asio::io_context& io, MqttBrokers& brokers,
                                                                       const routine::DeviceSpec& device,
                                                                       const DriverUri& uri);

  void read(Callback callback) override;
  // MQTT conventions carry no command id: it is not sent.
  void actuate(const routine::Attributes& values, const std::string& command_id, Callback callback) override;
  bool watch(Callback callback) override;

  const MqttConnection& connection() const { return *connection_; }
  const mqtt::Device& device() const { return device_; }

 private:
  struct Pending;

  void fail_soon(routine::DriverError error, Callback callback);
  uint64_t add_pending(bool is_read, std::set<std::string> wanted, Callback callback, std::string what);
  void on_message(const std::string& topic, std::string_view payload);
  void on_status(bool connected, const std::string& reason);
  // Completes the pending operations `ids` with `result`, then tells the
  // watcher `watch_result` if set; stops as soon as a callback destroyed
  // the driver.
  void complete(const std::vector<uint64_t>& ids, const routine::DriverResult& result,
                const std::optional<routine::DriverResult>& watch_result);
  std::string label() const;

  asio::io_context& io_;
  std::shared_ptr<MqttConnection> connection_;
  mqtt::Device device_;
  Options options_;
  std::vector<uint64_t> subscriptions_;
  uint64_t status_id_ = 0;
  std::optional<bool> online_;
  routine::Attributes state_;
  bool have_state_ = false;
  std::map<uint64_t, std::unique_ptr<Pending>> pending_;
  uint64_t next_pending_ = 1;
  Callback watcher_;
  std::shared_ptr<MqttDriver*> alive_;
};

}  // namespace mesh::drivers
