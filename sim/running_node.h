#pragma once

#include <cstdint>

namespace mesh::sim {

// Which simulated node the code running right now belongs to: set around
// everything a node does (its timers, a datagram delivered to it, its boot,
// a workload call into it), so whatever the process observes meanwhile can
// be charged to that node. bench/agent_memory_bench charges heap allocations
// with it to measure one agent's memory inside a whole simulated mesh.
// Single-threaded like the simulator itself.
inline constexpr int32_t kNoNode = -1;

int32_t running_node();

// Sets running_node() for its lifetime and restores the previous value, so
// a node's code that runs another node's code (it never does today) nests.
class RunningNodeScope {
 public:
  explicit RunningNodeScope(int32_t node);
  RunningNodeScope(const RunningNodeScope&) = delete;
  RunningNodeScope& operator=(const RunningNodeScope&) = delete;
  ~RunningNodeScope();

 private:
  int32_t previous_;
};

}  // namespace mesh::sim
