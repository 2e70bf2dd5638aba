#include "sim/sim_env.h"

#include <utility>

#include "sim/running_node.h"

namespace mesh::sim {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) { return splitmix(splitmix(splitmix(seed) ^ a) ^ b); }

SimEnv::SimEnv(Simulator& simulator, uint64_t seed, uint32_t node_index, uint32_t incarnation)
    : simulator_(simulator), node_index_(static_cast<int32_t>(node_index)), rng_(mix_seed(seed, node_index, incarnation)) {}

SimEnv::~SimEnv() { cancel_all(); }

void SimEnv::cancel_all() {
  for (const auto& [ours, event] : pending_) simulator_.cancel(event);
  pending_.clear();
}

core::TimerId SimEnv::schedule_one_shot(core::Duration delay, Callback callback) {
  const core::TimerId id = next_id_++;
  const core::TimerId event = simulator_.after(delay, [this, id, callback = std::move(callback)] {
    pending_.erase(id);
    const RunningNodeScope running(node_index_);
    callback();
  });
  pending_.emplace(id, event);
  return id;
}

void SimEnv::cancel_one_shot(core::TimerId id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  simulator_.cancel(it->second);
  pending_.erase(it);
}

}  // namespace mesh::sim
