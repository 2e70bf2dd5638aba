// A simulated mesh of Medley nodes: each node is a SimEnv, a Messenger on
// its IdealRouting transport and a Medley, with hop distances from the
// topology. Nodes crash (objects destroyed, node down) and restart (new
// objects, new Env incarnation), as the agent process would.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/messenger.h"
#include "core/metrics.h"
#include "membership/hop_distances.h"
#include "membership/medley.h"
#include "sim/ideal_routing.h"
#include "sim/network.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace mesh::membership::testing {

// All-pairs hop counts of a static topology, and none between the sides of
// a network partition, as OLSR has no route there once its topology tuples
// expire (here at once). A single link cut keeps the counts.
class TopologyHops final : public HopDistances {
 public:
  TopologyHops(const std::vector<std::vector<int>>& matrix, const std::map<core::NodeId, int>& index,
               const std::vector<core::NodeId>& ids, const sim::Network& network, int self)
      : matrix_(matrix), index_(index), ids_(ids), network_(network), self_(self) {}
  std::optional<uint32_t> hops_to(core::NodeId to) const override { return hops(self_, to); }
  std::optional<uint32_t> hops_between(core::NodeId from, core::NodeId to) const override {
    auto it = index_.find(from);
    if (it == index_.end()) return std::nullopt;
    return hops(it->second, to);
  }

 private:
  std::optional<uint32_t> hops(int from, core::NodeId to) const {
    auto it = index_.find(to);
    if (it == index_.end()) return std::nullopt;
    const int h = matrix_[static_cast<size_t>(from)][static_cast<size_t>(it->second)];
    if (h < 0) return std::nullopt;
    if (!network_.can_talk(ids_[static_cast<size_t>(from)], to)) return std::nullopt;
    return static_cast<uint32_t>(h);
  }
  const std::vector<std::vector<int>>& matrix_;
  const std::map<core::NodeId, int>& index_;
  const std::vector<core::NodeId>& ids_;
  const sim::Network& network_;
  int self_;
};

struct WorldOptions {
  double hop_loss = 0.0;
  core::Duration hop_delay = std::chrono::milliseconds(5);
  core::Duration hop_jitter = std::chrono::milliseconds(2);
  MedleyOptions medley;
};

class MedleyWorld {
 public:
  struct Slot {
    std::unique_ptr<sim::SimEnv> env;
    std::unique_ptr<core::Metrics> metrics;
    std::unique_ptr<core::Messenger> messenger;
    std::unique_ptr<TopologyHops> hops;
    std::unique_ptr<Medley> medley;
    uint32_t incarnation = 0;
    // Counters of crashed incarnations, so totals survive restarts.
    uint64_t bytes_before = 0;
  };

  MedleyWorld(sim::Topology topology, uint64_t seed, WorldOptions options)
      : seed_(seed),
        options_(std::move(options)),
        topology_(std::move(topology)),
        simulator_(seed),
        network_(simulator_, sim::mix_seed(seed, 0xbeef)),
        routing_(simulator_, network_, sim::mix_seed(seed, 0xfeed)) {
    sim::LinkParams params;
    params.delay = options_.hop_delay;
    params.jitter = options_.hop_jitter;
    params.loss = options_.hop_loss;
    for (size_t i = 0; i < topology_.size(); ++i) {
      const core::NodeId id = network_.add_node();
      ids_.push_back(id);
      index_[id] = static_cast<int>(i);
    }
    for (const auto& [a, b] : topology_.edges) network_.connect(ids_[static_cast<size_t>(a)], ids_[static_cast<size_t>(b)], params);
    for (size_t i = 0; i < topology_.size(); ++i) matrix_.push_back(topology_.hop_distances(static_cast<int>(i)));
    slots_.resize(topology_.size());
  }

  size_t size() const { return ids_.size(); }
  core::NodeId id(size_t i) const { return ids_[i]; }
  int index_of(core::NodeId id) const { return index_.at(id); }
  sim::Simulator& simulator() { return simulator_; }
  sim::Network& network() { return network_; }
  sim::IdealRouting& routing() { return routing_; }
  const sim::Topology& topology() const { return topology_; }
  int hops(size_t a, size_t b) const { return matrix_[a][b]; }
  Medley* medley(size_t i) { return slots_[i].medley.get(); }
  bool up(size_t i) const { return slots_[i].medley != nullptr; }
  core::Metrics* metrics(size_t i) { return slots_[i].metrics.get(); }
  const WorldOptions& options() const { return options_; }

  std::vector<core::NodeId> neighbour_ids(size_t i) const {
    std::vector<core::NodeId> out;
    for (int n : topology_.neighbours(static_cast<int>(i))) out.push_back(ids_[static_cast<size_t>(n)]);
    return out;
  }

  // Builds node i and starts it with its topology neighbours as contacts.
  // `on_built` runs before start (to attach listeners).
  void boot(size_t i, uint64_t initial_incarnation = 0, const std::function<void(size_t, Medley&)>& on_built = {}) {
    Slot& s = slots_[i];
    network_.set_node_up(ids_[i], true);
    s.env = std::make_unique<sim::SimEnv>(simulator_, seed_, static_cast<uint32_t>(i), s.incarnation++);
    s.metrics = std::make_unique<core::Metrics>();
    core::Messenger::Options mo;
    s.messenger = std::make_unique<core::Messenger>(*s.env, routing_.transport(ids_[i]), *s.metrics, mo);
    s.hops = std::make_unique<TopologyHops>(matrix_, index_, ids_, network_, static_cast<int>(i));
    MedleyOptions medley = options_.medley;
    // Formatted, not "n" + to_string(i): GCC 12 at -O3 flags string
    // concatenation here with a false -Wrestrict.
    char name[24];
    std::snprintf(name, sizeof name, "n%zu", i);
    medley.name = name;
    medley.location = topology_.positions[i];
    medley.initial_incarnation = initial_incarnation;
    s.medley = std::make_unique<Medley>(*s.env, *s.messenger, *s.metrics, *s.hops, medley);
    if (on_built) on_built(i, *s.medley);
    s.medley->start(neighbour_ids(i));
  }

  void crash(size_t i) {
    Slot& s = slots_[i];
    network_.set_node_up(ids_[i], false);
    if (s.metrics) s.bytes_before += sent_bytes_now(i);
    s.medley.reset();
    s.messenger.reset();
    s.hops.reset();
    s.env.reset();
    s.metrics.reset();
  }

  // Membership bytes this node's Medley has sent over its lives.
  uint64_t sent_bytes(size_t i) const { return slots_[i].bytes_before + sent_bytes_now(i); }

  void run_for(core::Duration d) { simulator_.run_for(d); }

 private:
  uint64_t sent_bytes_now(size_t i) const {
    return slots_[i].metrics ? slots_[i].metrics->total("membership_sent_bytes_total") : 0;
  }

  uint64_t seed_;
  WorldOptions options_;
  sim::Topology topology_;
  sim::Simulator simulator_;
  sim::Network network_;
  sim::IdealRouting routing_;
  std::vector<core::NodeId> ids_;
  std::map<core::NodeId, int> index_;
  std::vector<std::vector<int>> matrix_;
  std::vector<Slot> slots_;
};

// Whether the topology minus `gone` and `also` is connected.
inline bool still_connected_without(const sim::Topology& topology, const std::set<size_t>& gone, size_t also) {
  std::vector<bool> seen(topology.size(), false);
  auto excluded = [&](size_t i) { return i == also || gone.contains(i); };
  size_t start = 0;
  while (excluded(start)) ++start;
  std::vector<size_t> stack{start};
  seen[start] = true;
  size_t reached = 1;
  while (!stack.empty()) {
    const size_t a = stack.back();
    stack.pop_back();
    for (int nb : topology.neighbours(static_cast<int>(a))) {
      const auto b = static_cast<size_t>(nb);
      if (seen[b] || excluded(b)) continue;
      seen[b] = true;
      ++reached;
      stack.push_back(b);
    }
  }
  return reached == topology.size() - gone.size() - 1;
}

// Nearest-rank quantile of a non-empty sample.
inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace mesh::membership::testing
