#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "routine/device_driver.h"

namespace mesh::routine {

// A device that exists only in memory, for the simulator and unit tests:
// the one physical device every node's driver talks to. It records every
// actuation (time, command id, values), which is what the checkers trust:
// "actuated exactly once" is counted here, not in any leader's belief.
class EmulatedDevice {
 public:
  struct Actuation {
    core::TimePoint at;
    std::string command_id;
    Attributes values;
    // False when the device was stuck and did not already show `values`.
    bool took_effect = true;
  };

  EmulatedDevice(DeviceSpec spec, Attributes initial) : spec_(std::move(spec)), state_(std::move(initial)) {}

  const DeviceSpec& spec() const { return spec_; }
  const Attributes& state() const { return state_; }
  bool up() const { return up_; }
  const std::vector<Actuation>& actuations() const { return actuations_; }

  // The world changes the device: a sensor reading, a power cut of the device.
  void set_state(Attributes state) { state_ = std::move(state); }
  void set_up(bool up) { up_ = up; }
  // A stuck actuator: it answers and logs every actuation, but its state
  // does not change (APEX §7.3's actuation failure).
  void set_stuck(bool stuck) { stuck_ = stuck; }
  void actuate(core::TimePoint at, const std::string& command_id, const Attributes& values);

  // Time a read or actuation takes, and how long a driver waits for a device
  // that does not answer.
  core::Duration latency = std::chrono::milliseconds(5);
  core::Duration timeout = std::chrono::milliseconds(800);

 private:
  DeviceSpec spec_;
  Attributes state_;
  bool up_ = true;
  bool stuck_ = false;
  std::vector<Actuation> actuations_;
};

// Opens drivers for `emulated://ID` URIs onto the devices it was given
// (which must outlive every driver it opens). Drivers run on `env`'s timers.
class EmulatedDriverFactory : public DriverFactory {
 public:
  explicit EmulatedDriverFactory(core::Env& env) : env_(env) {}
  void add(EmulatedDevice& device) { devices_[device.spec().id] = &device; }
  core::Expected<std::unique_ptr<DeviceDriver>, std::string> open(const DeviceSpec& device) override;

  static constexpr std::string_view kScheme = "emulated://";

 private:
  core::Env& env_;
  std::map<std::string, EmulatedDevice*> devices_;
};

}  // namespace mesh::routine
