#include "agent/output_commit_drivers.h"

#include <utility>

namespace mesh::agent {
namespace {

class OutputCommitDriver final : public routine::DeviceDriver {
 public:
  OutputCommitDriver(std::unique_ptr<routine::DeviceDriver> inner, const OutputCommitDrivers::AfterDurable& after_durable)
      : inner_(std::move(inner)), after_durable_(after_durable) {}
  ~OutputCommitDriver() override { *alive_ = false; }

  void read(Callback callback) override { inner_->read(std::move(callback)); }
  bool watch(Callback callback) override { return inner_->watch(std::move(callback)); }

  void actuate(const routine::Attributes& values, const std::string& command_id, Callback callback) override {
    // Destroying this driver destroys inner_, which then runs no callback:
    // the contract holds without more bookkeeping.
    after_durable_([this, alive = alive_, values, command_id, callback = std::move(callback)]() mutable {
      if (*alive) inner_->actuate(values, command_id, std::move(callback));
    });
  }

 private:
  std::unique_ptr<routine::DeviceDriver> inner_;
  OutputCommitDrivers::AfterDurable after_durable_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> OutputCommitDrivers::open(
    const routine::DeviceSpec& device) {
  auto opened = inner_.open(device);
  if (!opened) return opened;
  return std::unique_ptr<routine::DeviceDriver>(std::make_unique<OutputCommitDriver>(std::move(*opened), after_durable_));
}

}  // namespace mesh::agent
