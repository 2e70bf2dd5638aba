#pragma once

#include <cstdint>
#include <unordered_map>

#include "core/env.h"
#include "sim/simulator.h"

namespace mesh::sim {

// splitmix64-style mixing of several words into one seed, so streams for
// different (seed, node, incarnation) triples are unrelated.
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0);

// The Env of one simulated node (one incarnation of it): the shared virtual
// clock, its own random stream, and timers on the shared Simulator. It knows
// every timer it has pending, so a crash can kill them all at once.
class SimEnv final : public core::Env {
 public:
  SimEnv(Simulator& simulator, uint64_t seed, uint32_t node_index, uint32_t incarnation);
  SimEnv(const SimEnv&) = delete;
  SimEnv& operator=(const SimEnv&) = delete;
  ~SimEnv() override;

  core::TimePoint now() const override { return simulator_.now(); }
  core::Rng& rng() override { return rng_; }

  // Cancels every pending timer of this node; nothing it scheduled runs
  // afterwards.
  void cancel_all();
  size_t pending_timers() const { return pending_.size(); }

 protected:
  core::TimerId schedule_one_shot(core::Duration delay, Callback callback) override;
  void cancel_one_shot(core::TimerId id) override;

 private:
  Simulator& simulator_;
  int32_t node_index_;
  core::Rng rng_;
  // Our ids (what callers see) -> the Simulator's event ids.
  std::unordered_map<core::TimerId, core::TimerId> pending_;
  core::TimerId next_id_ = 1;
};

}  // namespace mesh::sim
