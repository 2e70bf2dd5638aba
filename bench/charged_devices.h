#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/env.h"
#include "core/rng.h"
#include "routine/device_driver.h"
#include "routine/emulated_device.h"
#include "sim/topology.h"

// Emulated devices whose I/O costs mesh bandwidth (device_bench,
// routine_bench). A device sits at one node of the mesh (its access node);
// a leader's read or actuation (a Kasa get_sysinfo: kPollRequestBytes there,
// kPollReplyBytes back) crosses the shortest path from the leader to that
// node, and every node on it is charged the datagrams it sends, as
// CoMesh's simulator charges a device ping.
namespace mesh::bench {

inline constexpr uint64_t kPollRequestBytes = 60;
inline constexpr uint64_t kPollReplyBytes = 650;

struct ChargedDevices {
  std::vector<std::unique_ptr<routine::EmulatedDevice>> devices;
  std::vector<size_t> access_node;           // per device
  std::vector<std::vector<int>> hops;        // node -> node
  std::vector<std::vector<int>> neighbours;  // node -> sorted neighbours
  std::vector<uint64_t> io_bytes_by_node;    // sent by the node, device I/O
  std::vector<uint64_t> io_msgs_by_node;

  explicit ChargedDevices(const sim::Topology& topology) {
    const auto nodes = static_cast<size_t>(topology.size());
    for (size_t n = 0; n < nodes; ++n) {
      hops.push_back(topology.hop_distances(static_cast<int>(n)));
      neighbours.push_back(topology.neighbours(static_cast<int>(n)));
    }
    io_bytes_by_node.assign(nodes, 0);
    io_msgs_by_node.assign(nodes, 0);
  }

  // The next node from `from` towards `to` on a shortest path (the lowest
  // numbered, so a run is deterministic).
  size_t next_hop(size_t from, size_t to) const {
    for (int n : neighbours[from]) {
      if (hops[static_cast<size_t>(n)][to] == hops[from][to] - 1) return static_cast<size_t>(n);
    }
    return to;
  }
  // One datagram of `bytes` from `from` to `to`, charged to every sender on the path.
  void charge_path(size_t from, size_t to, uint64_t bytes) {
    if (hops[from][to] < 0) return;
    for (size_t at = from; at != to; at = next_hop(at, to)) {
      io_bytes_by_node[at] += bytes;
      ++io_msgs_by_node[at];
    }
  }
};

// `count` emulated devices at random access nodes (drawn from `rng`), every
// fourth a motion sensor and the rest plugs, each half a unit from its node;
// added to `world`, and their catalog returned (ids d0000, d0001, ...).
inline std::vector<routine::DeviceSpec> place_devices(ChargedDevices& world, const sim::Topology& topology,
                                                      size_t count, core::Rng& rng) {
  std::vector<routine::DeviceSpec> catalog;
  for (size_t d = 0; d < count; ++d) {
    routine::DeviceSpec spec;
    spec.id = fmt::format("d{:04}", d);
    spec.kind = d % 4 == 0 ? routine::DeviceKind::motion_sensor : routine::DeviceKind::plug;
    const size_t at = rng.below(static_cast<uint64_t>(topology.size()));
    spec.location = topology.positions[at];
    spec.location[0] += 0.5;
    spec.driver = "emulated://" + spec.id;
    catalog.push_back(spec);
    world.access_node.push_back(at);
    routine::Attributes initial = spec.kind == routine::DeviceKind::motion_sensor
                                      ? routine::Attributes{{"motion", false}}
                                      : routine::Attributes{{"power", false}};
    world.devices.push_back(std::make_unique<routine::EmulatedDevice>(spec, initial));
  }
  return catalog;
}

// The emulated driver, plus the device I/O's hop traffic charged along its path.
class ChargedDriver : public routine::DeviceDriver {
 public:
  ChargedDriver(std::unique_ptr<DeviceDriver> inner, ChargedDevices& world, size_t node, size_t device)
      : inner_(std::move(inner)), world_(world), node_(node), device_(device) {}
  void read(Callback callback) override {
    charge();
    inner_->read(std::move(callback));
  }
  void actuate(const routine::Attributes& values, const std::string& id, Callback callback) override {
    charge();
    inner_->actuate(values, id, std::move(callback));
  }
  bool watch(Callback callback) override { return inner_->watch(std::move(callback)); }

 private:
  void charge() {
    const size_t access = world_.access_node[device_];
    world_.charge_path(node_, access, kPollRequestBytes);
    world_.charge_path(access, node_, kPollReplyBytes);
  }
  std::unique_ptr<DeviceDriver> inner_;
  ChargedDevices& world_;
  size_t node_;
  size_t device_;
};

class ChargedFactory : public routine::DriverFactory {
 public:
  ChargedFactory(core::Env& env, ChargedDevices& world, size_t node) : inner_(env), world_(world), node_(node) {
    for (auto& d : world.devices) inner_.add(*d);
  }
  core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> open(const routine::DeviceSpec& spec) override {
    auto driver = inner_.open(spec);
    if (!driver) return driver;
    size_t index = 0;
    while (world_.devices[index]->spec().id != spec.id) ++index;
    return std::unique_ptr<routine::DeviceDriver>(
        std::make_unique<ChargedDriver>(std::move(*driver), world_, node_, index));
  }

 private:
  routine::EmulatedDriverFactory inner_;
  ChargedDevices& world_;
  size_t node_;
};

}  // namespace mesh::bench
