// Device monitoring on whole agents in meshsim (comesh.md Fig. 11 and Fig. 6
// for devices): decentralized (k = 3, LSH, clusters of at most 25 devices,
// so each device is led from nearby) against centralized (one group of
// k = 1 monitoring every device, CoMesh's "central" baseline), on the same
// topology, devices, sensor changes and seed. The baseline of every point is
// its centralized run: read decentralized / centralized.
//
// Devices sit at a random node of the mesh (their "access node"); a device
// leader's poll (a Kasa get_sysinfo, kPollBytes both ways) crosses the hops
// from the leader to that node, which the driver wrapper charges, as the
// paper's simulator charges a device ping. Every node watches every device
// (DeviceWatcher), so notifications are part of the traffic; a random sensor
// changes every `change_every` seconds.
//
// Counters per run (window of `measure_s` virtual seconds after a settle):
//   bytes_per_node_s_mean           agent bytes sent per node per second, hop
//                                   by hop (k-group, k-group client, routine
//                                   layers), plus device I/O hop bytes spread
//                                   over the nodes
//   agent_bytes_per_node_s_max      the busiest node's agent bytes per second
//   device_io_share                 share of the mean that is device I/O
//   propagation_p50_rtt / _p99_rtt  change committed by its leader -> every
//                                   subscriber's view, in one-hop RTTs
//   detection_p50_ms                device change -> its leader's commit
//                                   (polls every second)
//   groups_per_node_max, devices_per_leader_max   load balance (Fig. 6)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "core/rng.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::core::Duration;
using mesh::core::TimePoint;
using mesh::routine::Attributes;
using mesh::routine::DeviceKind;
using mesh::routine::DeviceSpec;
using mesh::routine::EmulatedDevice;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A Kasa get_sysinfo request and its reply, on the wire.
constexpr uint64_t kPollBytes = 60 + 650;
constexpr int kLinkDelayMs = 2;

struct World {
  std::vector<std::unique_ptr<EmulatedDevice>> devices;
  std::vector<size_t> access_node;          // per device
  std::vector<std::vector<int>> hops;       // node -> node
  std::vector<uint64_t> io_bytes_by_node;   // charged to the polling leader
};

// The emulated driver, plus the device I/O's hop bytes charged to its node.
class ChargedDriver : public mesh::routine::DeviceDriver {
 public:
  ChargedDriver(std::unique_ptr<DeviceDriver> inner, World& world, size_t node, size_t device)
      : inner_(std::move(inner)), world_(world), node_(node), device_(device) {}
  void read(Callback callback) override {
    charge();
    inner_->read(std::move(callback));
  }
  void actuate(const Attributes& values, const std::string& id, Callback callback) override {
    charge();
    inner_->actuate(values, id, std::move(callback));
  }
  bool watch(Callback callback) override { return inner_->watch(std::move(callback)); }

 private:
  void charge() {
    const int hops = world_.hops[node_][world_.access_node[device_]];
    world_.io_bytes_by_node[node_] += kPollBytes * static_cast<uint64_t>(std::max(hops, 0));
  }
  std::unique_ptr<DeviceDriver> inner_;
  World& world_;
  size_t node_;
  size_t device_;
};

class ChargedFactory : public mesh::routine::DriverFactory {
 public:
  ChargedFactory(mesh::core::Env& env, World& world, size_t node) : inner_(env), world_(world), node_(node) {
    for (auto& d : world.devices) inner_.add(*d);
  }
  mesh::core::Expected<std::unique_ptr<mesh::routine::DeviceDriver>, std::string> open(
      const DeviceSpec& spec) override {
    auto driver = inner_.open(spec);
    if (!driver) return driver;
    size_t index = 0;
    while (world_.devices[index]->spec().id != spec.id) ++index;
    return std::unique_ptr<mesh::routine::DeviceDriver>(
        std::make_unique<ChargedDriver>(std::move(*driver), world_, node_, index));
  }

 private:
  mesh::routine::EmulatedDriverFactory inner_;
  World& world_;
  size_t node_;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

uint64_t agent_bytes(mesh::sim::MeshSim& sim, size_t node) {
  uint64_t total = 0;
  for (const auto& row : sim.node(node)->metrics().counters()) {
    if (row.name != "bytes_total") continue;
    std::map<std::string, std::string> l(row.labels.begin(), row.labels.end());
    if (l["scope"] == "hop" && l["direction"] == "sent" &&
        (l["layer"] == "kgroup" || l["layer"] == "kgroup_client" || l["layer"] == "routine")) {
      total += row.value;
    }
  }
  return total;
}

void BM_DeviceMonitoring(benchmark::State& state) {
  mesh::core::log_to_null();
  const auto nodes = static_cast<size_t>(state.range(0));
  const auto device_count = static_cast<size_t>(state.range(1));
  const bool central = state.range(2) == 1;
  static constexpr int settle_s = 40;
  static constexpr int measure_s = 60;
  constexpr int change_every_s = 2;
  std::map<std::string, double> totals;
  uint64_t runs = 0;
  for (auto _ : state) {
    const uint64_t seed = 1 + runs++;
    mesh::sim::Scenario scenario;
    scenario.source = "device-bench";
    scenario.topology.kind = "random";
    scenario.topology.nodes = static_cast<int>(nodes);
    scenario.topology.seed = seed;
    scenario.link.delay_ms = kLinkDelayMs;
    scenario.run.duration_s = settle_s + measure_s;

    // Devices at random access nodes, near them.
    World world;
    mesh::core::Rng rng(seed * 31 + 7);
    mesh::sim::MeshSim probe(scenario, seed);  // only for the topology
    const auto& topology = probe.topology();
    for (size_t n = 0; n < nodes; ++n) world.hops.push_back(topology.hop_distances(static_cast<int>(n)));
    world.io_bytes_by_node.assign(nodes, 0);
    std::vector<DeviceSpec> catalog;
    for (size_t d = 0; d < device_count; ++d) {
      DeviceSpec spec;
      spec.id = fmt::format("d{:04}", d);
      spec.kind = d % 4 == 0 ? DeviceKind::motion_sensor : DeviceKind::plug;
      const size_t at = rng.below(nodes);
      spec.location = topology.positions[at];
      spec.location[0] += 0.5;
      spec.driver = "emulated://" + spec.id;
      catalog.push_back(spec);
      world.access_node.push_back(at);
      Attributes initial = spec.kind == DeviceKind::motion_sensor ? Attributes{{"motion", false}}
                                                                   : Attributes{{"power", false}};
      world.devices.push_back(std::make_unique<EmulatedDevice>(spec, initial));
    }

    std::vector<std::unique_ptr<ChargedFactory>> factories;
    mesh::sim::MeshSim::Options options;
    options.configure = [&](mesh::agent::NodeConfig& config) {
      config.kgroup.selection.k = central ? 1 : 3;
      config.kgroup.selection.mode = central ? mesh::kgroup::SelectionMode::hash : mesh::kgroup::SelectionMode::lsh;
      config.kgroup.selection.clusters.devices_per_cluster = central ? device_count : 25;
      config.devices.catalog = catalog;
      config.devices.catalog_digest = "bench";
    };
    options.drivers = [&](size_t index, mesh::core::Env& env) {
      factories.push_back(std::make_unique<ChargedFactory>(env, world, index));
      return factories.back().get();
    };
    mesh::sim::MeshSim sim(scenario, seed, options);
    sim.run_until(TimePoint(seconds(settle_s / 2)));
    // Every node watches every device; record when each view shows a version.
    std::vector<double> propagation_ms;
    std::vector<double> detection_ms;
    std::map<std::string, double> changed_ms;  // device -> virtual time of its latest change, until detected
    for (size_t n = 0; n < nodes; ++n) {
      sim.node(n)->device_watcher().watch(
          {}, [&](const std::string& device, const mesh::routine::DeviceWatcher::Seen& seen) {
            if (seen.record.changed_at_us <= 0 || sim.simulator().now() < TimePoint(seconds(settle_s))) return;
            const double committed = static_cast<double>(seen.record.changed_at_us) / 1000.0;
            propagation_ms.push_back(mesh::core::to_millis(sim.simulator().now().time_since_epoch()) - committed);
            const auto change = changed_ms.find(device);
            if (change != changed_ms.end() && committed >= change->second) {
              detection_ms.push_back(committed - change->second);
              changed_ms.erase(change);
            }
          });
    }
    sim.run_until(TimePoint(seconds(settle_s)));
    std::vector<uint64_t> before(nodes);
    for (size_t n = 0; n < nodes; ++n) before[n] = agent_bytes(sim, n);
    std::vector<uint64_t> io_before = world.io_bytes_by_node;

    for (int t = settle_s; t < settle_s + measure_s; t += change_every_s) {
      sim.run_until(TimePoint(seconds(t)));
      size_t d = rng.below(device_count);
      while (world.devices[d]->spec().kind != DeviceKind::motion_sensor) d = rng.below(device_count);
      const bool motion = !std::get<bool>(world.devices[d]->state().at("motion"));
      world.devices[d]->set_state({{"motion", motion}});
      changed_ms[world.devices[d]->spec().id] = mesh::core::to_millis(sim.simulator().now().time_since_epoch());
    }
    sim.run_until(TimePoint(seconds(settle_s + measure_s)));
    // Agent bytes per node; device I/O hop bytes over the whole mesh (their
    // hops load the nodes on each path, which the simulation does not track).
    std::vector<double> per_node;
    double io_total = 0;
    for (size_t n = 0; n < nodes; ++n) {
      io_total += static_cast<double>(world.io_bytes_by_node[n] - io_before[n]);
      per_node.push_back(static_cast<double>(agent_bytes(sim, n) - before[n]) / measure_s);
    }
    double agent_mean = 0;
    for (double b : per_node) agent_mean += b;
    agent_mean /= static_cast<double>(nodes);
    const double io_mean = io_total / measure_s / static_cast<double>(nodes);
    const double mean = agent_mean + io_mean;
    double groups_max = 0;
    std::map<std::string, double> led;
    for (size_t n = 0; n < nodes; ++n) {
      groups_max = std::max(groups_max, static_cast<double>(sim.node(n)->kgroups().host().replicas().size()));
      led[std::to_string(n)] = static_cast<double>(sim.node(n)->device_leaders().led_devices().size());
    }
    double led_max = 0;
    for (const auto& [n, c] : led) led_max = std::max(led_max, c);
    const double rtt_ms = 2.0 * kLinkDelayMs;
    totals["bytes_per_node_s_mean"] += mean;
    totals["agent_bytes_per_node_s_max"] += *std::max_element(per_node.begin(), per_node.end());
    totals["device_io_share"] += mean > 0 ? io_mean / mean : 0;
    totals["propagation_p50_rtt"] += quantile(propagation_ms, 0.5) / rtt_ms;
    totals["propagation_p99_rtt"] += quantile(propagation_ms, 0.99) / rtt_ms;
    totals["detection_p50_ms"] += quantile(detection_ms, 0.5);
    totals["groups_per_node_max"] += groups_max;
    totals["devices_per_leader_max"] += led_max;
  }
  for (const auto& [name, sum] : totals) state.counters[name] = sum / static_cast<double>(runs);
}

// nodes, devices, centralized (1) or not (0). The centralized run of each
// point is its baseline.
BENCHMARK(BM_DeviceMonitoring)
    ->ArgsProduct({{25}, {16, 64}, {0, 1}})
    ->Args({50, 128, 0})
    ->Args({50, 128, 1})
    ->Args({100, 250, 0})
    ->Args({100, 250, 1})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
