#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/node.h"
#include "core/metrics.h"
#include "core/packet_auth.h"
#include "sim/network.h"
#include "sim/scenario.h"
#include "sim/sim_disk.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace mesh::sim {

// A whole mesh on virtual time: one agent::Node per topology node, wired to
// the simulated Network, with the scenario's events and ping workload. The
// run and everything it writes are a pure function of (scenario, seed).
class MeshSim {
 public:
  struct Options {
    // Nodes boot at uniform random offsets in [0, start_spread), as real
    // nodes never power up in the same microsecond.
    core::Duration start_spread = std::chrono::seconds(1);
    // Applied to every node's config before it is built (tests tune retry
    // policies here); may be empty.
    std::function<void(agent::NodeConfig&)> configure;
    // Turns on every node's hop-by-hop ARQ (routing/hop_arq.h, off in the
    // agent's default config) before `configure` runs.
    bool hop_arq = false;
    // The device drivers of node `index`'s incarnation running on `env`
    // (emulated devices, routine/emulated_device.h); may be empty (no
    // drivers). What it returns must outlive that incarnation.
    std::function<routine::DriverFactory*(size_t index, core::Env& env)> drivers;
    // Every node's disk; the default commits at once (no write is ever
    // lost to a crash), a slow one loses what was not yet durable. A soak
    // outside CI can give every sweep slow disks: MESH_SIM_SLOW_DISKS=1 in
    // the environment turns a default disk into SimDisk::slow().
    SimDisk::Options disk;
  };

  struct PingStats {
    uint64_t sent = 0;
    uint64_t ok = 0;
    uint64_t timeout = 0;
    uint64_t rejected = 0;
    uint64_t skipped = 0;  // the chosen source was crashed or not yet booted
    core::Histogram rtt_ms;
  };

  MeshSim(const Scenario& scenario, uint64_t seed);
  MeshSim(const Scenario& scenario, uint64_t seed, Options options);
  MeshSim(const MeshSim&) = delete;
  MeshSim& operator=(const MeshSim&) = delete;
  ~MeshSim();

  // Runs to the scenario's duration. `progress` (may be empty) is called
  // with the fraction done, a hundred times over the run.
  void run(const std::function<void(double)>& progress = {});
  // Runs up to `until` (events, workload and nodes included).
  void run_until(core::TimePoint until);

  void crash(size_t index);
  void restart(size_t index);

  size_t size() const { return slots_.size(); }
  uint64_t seed() const { return seed_; }
  core::NodeId id_of(size_t index) const { return Network::address_of(index); }
  // Null while the node is crashed.
  agent::Node* node(size_t index) { return slots_.at(index).node.get(); }
  // Node `index`'s disk, which survives its crashes.
  SimDisk& disk(size_t index) { return *slots_.at(index).storage; }
  // Whether a majority of the members of `target`'s newest group instance
  // (highest epoch and generation any live node hosts) is alive; true when
  // no live node hosts one. The agent sweeps expect liveness only there.
  bool quorum_alive(const std::string& target);
  Simulator& simulator() { return simulator_; }
  Network& network() { return network_; }
  const Topology& topology() const { return topology_; }
  const Scenario& scenario() const { return scenario_; }
  const PingStats& pings() const { return pings_; }

  // node,series,name,labels,value: every counter of every node (summed over
  // its incarnations), sorted by node index then series.
  std::string counters_csv() const;
  // node,incarnation,series,name,labels,count,sum,min,max,mean,p50,p90,p99
  std::string histograms_csv() const;
  // channel,metric,value for the network, plus the ping workload.
  std::string network_csv() const;
  // Writes counters.csv, histograms.csv and network.csv into `dir`
  // (created if needed). Throws std::runtime_error on an I/O error.
  void write_csv(const std::filesystem::path& dir) const;

  // Message totals over all nodes and incarnations, keyed by
  // "layer/scope/direction" from messages_total{layer,scope,direction}.
  std::map<std::string, uint64_t> message_totals() const;
  // A human summary: virtual time, events, datagrams, pings, messages.
  std::string summary() const;

 private:
  struct CounterValue {
    std::string name;
    core::Labels labels;
    uint64_t value = 0;
  };
  struct HistogramSnapshot {
    uint32_t incarnation;
    std::string series;
    std::string name;
    core::Labels labels;
    uint64_t count;
    double sum, min, max, mean, p50, p90, p99;
  };
  struct Slot {
    std::unique_ptr<SimDisk> storage;
    std::unique_ptr<SimEnv> env;
    std::unique_ptr<agent::Node> node;
    uint32_t incarnation = 0;
    bool down = false;  // crashed by the scenario (or by crash())
    // Counters and histograms of earlier incarnations.
    std::map<std::string, CounterValue> retired_counters;
    std::vector<HistogramSnapshot> retired_histograms;
  };

  void boot(size_t index);
  void retire(Slot& slot) const;
  void apply(const ScenarioEvent& event);
  void schedule_ping();
  void ping_once();
  std::map<std::string, CounterValue> counters_of(size_t index) const;
  std::vector<HistogramSnapshot> histograms_of(size_t index) const;
  static void snapshot(const core::Metrics& metrics, uint32_t incarnation, std::vector<HistogramSnapshot>& out);

  Scenario scenario_;
  uint64_t seed_;
  Options options_;
  Simulator simulator_;
  Network network_;
  Topology topology_;
  core::MeshKey mesh_key_;
  std::vector<Slot> slots_;
  PingStats pings_;
  uint64_t events_applied_ = 0;
  uint64_t events_ignored_ = 0;
};

}  // namespace mesh::sim
