// The test state machine of the k-group simulations: the list of counter
// values applied, in order. Every apply and restore is reported to a
// KgroupChecker, which holds the target's history across epochs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kgroup/state_machine.h"
#include "sim/kgroup_checker.h"

namespace mesh::sim {

class CounterLog final : public kgroup::StateMachine {
 public:
  // `on_restored` runs after each accepted restore (an inherited state
  // arrived complete).
  CounterLog(KgroupChecker& checker, std::string target, std::function<void()> on_restored = {});

  void apply(uint64_t seq, std::string_view update) override;
  std::string snapshot() const override;
  bool restore(std::string_view snapshot) override;

  const std::vector<uint64_t>& values() const { return values_; }
  std::optional<size_t> position_of(uint64_t value) const;

 private:
  KgroupChecker& checker_;
  std::string target_;
  std::function<void()> on_restored_;
  std::vector<uint64_t> values_;
  std::map<uint64_t, size_t> position_;
  std::optional<uint64_t> last_seq_;
};

}  // namespace mesh::sim
