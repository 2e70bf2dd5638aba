#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "sim/mesh_sim.h"

// What the whole-agent benchmarks read from a MeshSim's groups: the serving
// leaders' replicated state, never a leader's belief.
namespace mesh::bench {

// The serving replicas of `target` across the mesh, newest instance first.
inline std::vector<kgroup::GroupReplica*> serving_replicas(sim::MeshSim& sim, const std::string& target) {
  std::vector<kgroup::GroupReplica*> out;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* replica = node->kgroups().host().latest(target);
    if (replica != nullptr && replica->serving()) out.push_back(replica);
  }
  std::sort(out.begin(), out.end(), [](const kgroup::GroupReplica* a, const kgroup::GroupReplica* b) {
    return std::make_pair(a->config().epoch, a->config().generation) >
           std::make_pair(b->config().epoch, b->config().generation);
  });
  return out;
}

// Share of `devices` whose group's serving leader has observed them, and
// whose replicated state equals the device's true state.
inline std::pair<double, double> led_device_shares(
    sim::MeshSim& sim, const std::vector<std::unique_ptr<routine::EmulatedDevice>>& devices) {
  std::map<std::string, const routine::DeviceGroupState::Device*> led;
  for (size_t n = 0; n < sim.size(); ++n) {
    agent::Node* node = sim.node(n);
    if (node == nullptr) continue;
    for (kgroup::GroupReplica* replica : node->kgroups().host().replicas()) {
      if (!replica->serving()) continue;
      const auto* group = dynamic_cast<const routine::DeviceGroupState*>(&replica->state_machine());
      if (group == nullptr) continue;
      for (const auto& [device, record] : group->devices()) led[device] = &record;
    }
  }
  size_t known = 0;
  size_t current = 0;
  for (const auto& device : devices) {
    const auto record = led.find(device->spec().id);
    if (record == led.end() || !record->second->known) continue;
    ++known;
    if (record->second->attributes == device->state()) ++current;
  }
  const auto count = static_cast<double>(devices.size());
  return {static_cast<double>(known) / count, static_cast<double>(current) / count};
}

}  // namespace mesh::bench
