#pragma once

// A simulated mesh of Camera nodes for the mutex tests and the benchmark:
// per node a SimEnv, a Messenger on the node's IdealRouting transport, a
// StaticMemberView the scenario fills (inconsistent lists on purpose) and a
// Camera. The world is also the safety oracle: every grant is checked
// against the holders of the moment, and its fencing token against the
// tokens of every earlier holder that released the resource.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_storage.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "membership/static_member_view.h"
#include "mutex/camera.h"
#include "sim/ideal_routing.h"
#include "sim/network.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace mesh::mutex::testing {

struct WorldOptions {
  size_t nodes = 8;
  // "random" (random geometric, the paper's default), "grid" or "line".
  std::string topology = "random";
  sim::LinkParams link;
  // Member lists here are set by the tests (set_list), not grown by a
  // membership protocol: there is nothing for boot_settle to wait for.
  CameraOptions camera = [] {
    CameraOptions o;
    o.boot_settle = core::Duration::zero();
    return o;
  }();
  core::Messenger::Options messenger;
  // Hop-by-hop ARQ on every unicast hop (sim::IdealRouting::enable_hop_arq).
  std::optional<routing::HopArq::Options> hop_arq;
};

class CameraWorld {
 public:
  CameraWorld(uint64_t seed, WorldOptions options);
  CameraWorld(const CameraWorld&) = delete;
  CameraWorld& operator=(const CameraWorld&) = delete;
  ~CameraWorld();

  size_t size() const { return nodes_.size(); }
  core::NodeId id(size_t i) const { return ids_[i]; }
  std::vector<core::NodeId> all_ids() const { return ids_; }
  bool up(size_t i) const { return nodes_[i].camera != nullptr; }
  Camera& camera(size_t i) { return *nodes_[i].camera; }
  membership::StaticMemberView& view(size_t i) { return *nodes_[i].view; }
  core::Metrics& metrics(size_t i) { return *nodes_[i].metrics; }
  core::MemoryStorage& storage(size_t i) { return *nodes_[i].storage; }
  sim::Simulator& simulator() { return simulator_; }
  sim::Network& network() { return network_; }
  sim::IdealRouting& routing() { return routing_; }
  const sim::Topology& topology() const { return topology_; }
  core::TimePoint now() const { return simulator_.now(); }

  // Node i's member list (self is always added).
  void set_list(size_t i, const std::vector<size_t>& members);
  // Kills node i: its Camera, Messenger and timers vanish and the radio
  // stops hearing it. Whatever it held is no longer held.
  void crash(size_t i);
  // Boots node i again as a new incarnation with the given list.
  void restart(size_t i, const std::vector<size_t>& members);

  // One critical section: acquire, hold for `hold`, release. `done` runs
  // after the release (or on an error) unless the node crashed meanwhile.
  struct Section {
    size_t node = 0;
    std::string resource;
    core::Duration hold{};
    core::Duration timeout = Camera::kNoTimeout;
  };
  void run_section(const Section& section, std::function<void(bool granted)> done = nullptr);

  // Oracle results.
  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t grants() const { return grants_; }
  uint64_t slow_grants() const { return slow_grants_; }
  // Grants whose token did not exceed a released one, after some crash
  // (a violation too: persisted marks must prevent them; kept apart to say
  // which invariant broke).
  uint64_t token_repeats_after_crash() const { return token_repeats_after_crash_; }
  // Grants made while the previous holder's lease had run out (it no longer
  // showed the grant): not a violation, the holder had let go.
  uint64_t superseded_lapsed() const { return superseded_lapsed_; }
  // Sections started on nodes that are still up and not yet finished.
  size_t unfinished() const;
  std::vector<std::string> unfinished_descriptions() const;
  // Grant wait times in virtual milliseconds.
  const std::vector<double>& waits_ms() const { return waits_ms_; }

 private:
  struct Node {
    uint32_t incarnation = 0;
    // Survives crashes, like the agent's file storage.
    std::unique_ptr<core::MemoryStorage> storage = std::make_unique<core::MemoryStorage>();
    std::unique_ptr<sim::SimEnv> env;
    std::unique_ptr<core::Metrics> metrics;
    std::unique_ptr<membership::StaticMemberView> view;
    std::unique_ptr<core::Messenger> messenger;
    std::unique_ptr<Camera> camera;
  };
  struct Holder {
    size_t node;
    uint32_t incarnation;
    uint64_t token;
    core::TimePoint since;
  };
  struct Open {
    size_t node;
    uint32_t incarnation;
    std::string resource;
  };

  void boot(size_t i);
  void on_grant(uint64_t section_id, const Section& section, uint32_t incarnation, const Grant& grant,
                std::function<void(bool)> done);

  uint64_t seed_;
  WorldOptions options_;
  sim::Simulator simulator_;
  sim::Network network_;
  sim::IdealRouting routing_;
  sim::Topology topology_;
  std::vector<core::NodeId> ids_;
  std::vector<Node> nodes_;

  std::map<std::string, Holder> holders_;
  std::map<std::string, uint64_t> last_token_;  // largest token of a released section
  std::map<uint64_t, Open> open_;
  uint64_t next_section_ = 1;
  std::vector<std::string> violations_;
  uint64_t superseded_lapsed_ = 0;
  uint64_t grants_ = 0;
  uint64_t slow_grants_ = 0;
  uint64_t crashes_ = 0;
  uint64_t token_repeats_after_crash_ = 0;
  std::vector<double> waits_ms_;
};

}  // namespace mesh::mutex::testing
