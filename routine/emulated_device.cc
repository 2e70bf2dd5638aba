#include "routine/emulated_device.h"

#include <algorithm>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

// A pull driver onto one EmulatedDevice. The device's answer is taken when
// the latency has passed (a device that went down meanwhile does not answer).
class EmulatedDriver : public DeviceDriver {
 public:
  EmulatedDriver(core::Env& env, EmulatedDevice& device) : env_(env), device_(device) {}
  ~EmulatedDriver() override { *alive_ = false; }

  void read(Callback callback) override {
    answer(std::move(callback), [](EmulatedDevice& device) { return DriverResult(device.state()); });
  }

  void actuate(const Attributes& values, const std::string& command_id, Callback callback) override {
    answer(std::move(callback), [this, values, command_id](EmulatedDevice& device) {
      device.actuate(env_.now(), command_id, values);
      return DriverResult(device.state());
    });
  }

  bool watch(Callback /*callback*/) override { return false; }

 private:
  template <typename Act>
  void answer(Callback callback, Act act) {
    const bool up = device_.up();
    env_.start_timer(up ? device_.latency : device_.timeout,
                     [alive = alive_, &device = device_, callback = std::move(callback), act = std::move(act)] {
                       if (!*alive) return;
                       if (!device.up()) {
                         callback(core::Unexpected(DriverError{DriverFailure::timeout, "no answer"}));
                         return;
                       }
                       callback(act(device));
                     });
  }

  core::Env& env_;
  EmulatedDevice& device_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

void EmulatedDevice::actuate(core::TimePoint at, const std::string& command_id, const Attributes& values) {
  const bool already = std::all_of(values.begin(), values.end(), [this](const auto& wanted) {
    const auto it = state_.find(wanted.first);
    return it != state_.end() && it->second == wanted.second;
  });
  actuations_.push_back({at, command_id, values, !stuck_ || already});
  if (stuck_) return;
  for (const auto& [name, value] : values) state_[name] = value;
}

core::Expected<std::unique_ptr<DeviceDriver>, std::string> EmulatedDriverFactory::open(const DeviceSpec& device) {
  if (device.driver.rfind(kScheme, 0) != 0) {
    return core::Unexpected(fmt::format("driver '{}' is not {}ID", device.driver, kScheme));
  }
  const std::string id = device.driver.substr(kScheme.size());
  const auto it = devices_.find(id);
  if (it == devices_.end()) return core::Unexpected(fmt::format("no emulated device '{}'", id));
  return std::unique_ptr<DeviceDriver>(std::make_unique<EmulatedDriver>(env_, *it->second));
}

}  // namespace mesh::routine
