#pragma once

#include <functional>
#include <memory>
#include <string>

#include "routine/device_driver.h"

namespace mesh::agent {

// Device drivers whose actuations wait until the node's storage changes made
// before them are durable (core::Storage::after_durable): switching a
// device is output to the world like a message, and a power cut must not
// leave a plug switched by a command the node has no durable record of (a
// single-member group commits on its own write alone). Reads and watches
// pass straight through: they show nothing.
class OutputCommitDrivers final : public routine::DriverFactory {
 public:
  using AfterDurable = std::function<void(std::function<void()> action)>;

  OutputCommitDrivers(routine::DriverFactory& inner, AfterDurable after_durable)
      : inner_(inner), after_durable_(std::move(after_durable)) {}

  core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> open(
      const routine::DeviceSpec& device) override;

 private:
  routine::DriverFactory& inner_;
  AfterDurable after_durable_;
};

}  // namespace mesh::agent
