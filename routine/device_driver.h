#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/expected.h"
#include "routine/device_model.h"

namespace mesh::routine {

// Why a driver could not read or actuate a device.
enum class DriverFailure {
  unreachable,  // connection refused or reset, host unreachable, broker down
  timeout,      // no (complete) answer in time
  protocol,     // an answer that is not what the protocol says: garbage, oversized, wrong shape
  refused,      // the device answered with an error (e.g. Kasa err_code != 0)
};
std::string_view to_string(DriverFailure failure);

struct DriverError {
  DriverFailure failure = DriverFailure::unreachable;
  std::string reason;  // for people: "connect 10.0.0.7:9999: connection refused"
};

using DriverResult = core::Expected<Attributes, DriverError>;

// One device as the device leader sees it: read its state, actuate it, and
// (push drivers) hear about changes. Device I/O lives behind this interface:
// the agent implements it over TCP (Kasa) and MQTT (agent/drivers/), the
// simulator and unit tests with emulated devices on the Env's timers.
//
// Contract, for every implementation:
//  - Every callback runs on the Env's thread (the agent's event loop), never
//    from inside the call that started it, and exactly once per read() or
//    actuate(), within the driver's own timeout: a device that never answers
//    yields DriverFailure::timeout, a garbled answer DriverFailure::protocol;
//    nothing a device sends can crash or block the agent.
//  - After the driver is destroyed no callback runs.
//  - Attributes use the device model's names and types (device_model.h);
//    values the device reports outside the schema are the caller's to drop
//    (sanitize_state).
class DeviceDriver {
 public:
  using Callback = std::function<void(const DriverResult& result)>;

  virtual ~DeviceDriver() = default;

  // Reads the device's current state (one poll).
  virtual void read(Callback callback) = 0;
  // Sets `values` (already checked against the schema) for the command
  // `command_id` (drivers that can pass it along, e.g. in a Kasa request's
  // extension field, do, so a device's actuation log names the command). On
  // success the result carries the state after actuation if the device
  // reported it (else empty attributes: the caller reads again).
  virtual void actuate(const Attributes& values, const std::string& command_id, Callback callback) = 0;
  // Push drivers (MQTT) report every state change and loss of contact
  // through `callback` until destroyed, and return true; pull drivers (Kasa,
  // emulated) return false and are polled with read().
  virtual bool watch(Callback callback) = 0;
};

// Opens drivers from a device's driver URI. The agent's factory knows the
// real schemes (kasa, mqtt, tasmota, ...); the simulator's knows emulated://.
class DriverFactory {
 public:
  virtual ~DriverFactory() = default;
  // An error names the URI and what is wrong with it.
  virtual core::Expected<std::unique_ptr<DeviceDriver>, std::string> open(const DeviceSpec& device) = 0;
};

}  // namespace mesh::routine
