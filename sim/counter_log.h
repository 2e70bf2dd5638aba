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
#include <utility>
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

  std::optional<std::string> migration_unwelcome() const override { return migration_unwelcome_; }

  const std::vector<uint64_t>& values() const { return values_; }
  std::optional<size_t> position_of(uint64_t value) const;
  // What migration_unwelcome() answers from now on (not replicated: a test
  // sets it at the leader it means).
  void set_migration_unwelcome(std::optional<std::string> why) { migration_unwelcome_ = std::move(why); }

 private:
  KgroupChecker& checker_;
  std::string target_;
  std::function<void()> on_restored_;
  std::vector<uint64_t> values_;
  std::map<uint64_t, size_t> position_;
  std::optional<uint64_t> last_seq_;
  std::optional<std::string> migration_unwelcome_;
};

}  // namespace mesh::sim
