// Device monitoring on whole agents in meshsim (comesh.md Fig. 11 and Fig. 6
// for devices): decentralized (k = 3, LSH, clusters of at most 25 devices,
// so each device is led from nearby) against centralized (one group of
// k = 1 monitoring every device, CoMesh's "central" baseline), on the same
// topology, devices, sensor changes and seed. The baseline of every point is
// its centralized run: read decentralized / centralized.
//
// Devices sit at a random node of the mesh (their "access node"); a device
// leader's poll (a Kasa get_sysinfo: kPollRequestBytes there,
// kPollReplyBytes back) crosses the shortest path from the leader to that
// node, and every node on it is charged the datagrams it sends, as the
// paper's simulator charges a device ping. Every node watches every device
// (DeviceWatcher), so notifications are part of the traffic; a random sensor
// changes every `change_every` seconds.
//
// The settle is not fixed: the run measures once every node's view knows
// every device (each device has a leader that observed it and told every
// watcher), or after kSettleCap_s regardless; settle_s says which. Then a
// window of DEVICE_BENCH_MEASURE_S (default 60) virtual seconds.
//
// BM_DeviceMonitoringUnwatched runs the same points with no watcher: only
// the leaders' monitoring (polls, replication of what they observe, group
// upkeep), the load comesh.md Fig. 11 compares. Its settle and shares look at
// the serving leaders' replicated state instead of views, and it has no
// propagation or detection samples (their counters read 0).
//
// Counters per run:
//   bytes_per_node_s_mean / _max      bytes sent per node per second, hop by
//   msgs_per_node_s_mean / _max       hop: agent layers (k-group, k-group
//                                     client, routine) plus device I/O; _max
//                                     is the busiest node
//   agent_bytes_per_node_s_max        the busiest node without device I/O
//   device_io_share                   share of the mean bytes that is device I/O
//   propagation_p50_rtt / _p99_rtt    change committed by its leader -> every
//                                     subscriber's view, in one-hop RTTs
//   detection_p50_ms                  device change -> its leader's commit
//                                     (polls every second)
//   groups_per_node_max, devices_per_leader_max   load balance (Fig. 6)
//   settle_s                          virtual seconds until every view knew
//                                     every device (kSettleCap_s: never)
//   observed_share                    at the end of the window, share of
//                                     (node, device) views that know the device
//   current_share                     ... that equal the device's true state
// A point with observed_share or current_share below 1 measured a mesh that
// was not monitoring all of its devices: read its traffic with that in mind.
//
// With DEVICE_BENCH_OUT=DIR, each run also appends to DIR/device_load_cdf.csv
// (per node: groups hosted and led, devices led; the Fig. 6 CDFs) and
// DIR/device_traffic.csv (window traffic per scope, layer and message type);
// bench/device_plot.py draws them. DEVICE_BENCH_LARGE=1 adds 100 nodes with
// 1000 devices and 250 nodes with 500 and 1000 to the grid.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_output.h"
#include "bench/charged_devices.h"
#include "bench/mesh_probes.h"
#include "core/log.h"
#include "core/rng.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::bench::ChargedDevices;
using mesh::bench::ChargedFactory;
using mesh::bench::quantile;
using mesh::core::TimePoint;
using mesh::routine::DeviceKind;
using mesh::routine::DeviceSpec;
using std::chrono::seconds;

constexpr int kLinkDelayMs = 2;
// Watchers subscribe once every node has booted (MeshSim's start spread is 1 s).
constexpr int kWatchFrom_s = 2;
constexpr int kSettleCap_s = 300;
constexpr int kChangeEvery_s = 2;

bool is_agent_layer(const std::string& layer) {
  return layer == "kgroup" || layer == "kgroup_client" || layer == "routine";
}

// The traffic a node sent, per (scope, layer, message type): bytes,
// messages. Scope "hop" counts every datagram on a link, "e2e" every message
// once (Metrics::count_traffic); ("e2e", "routine", "device_notify") counts
// the device leaders' notifications (changes and answers to renewals), whose
// bytes the metrics do not separate from the other routine messages.
struct Traffic {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, std::pair<uint64_t, uint64_t>> by_type;

  static Traffic of(mesh::sim::MeshSim& sim, size_t node) {
    Traffic t;
    for (const auto& row : sim.node(node)->metrics().counters()) {
      if (row.name == "device_notifications_total") {
        t.by_type[{"e2e", "routine", "device_notify"}].second += row.value;
        continue;
      }
      if (row.name != "bytes_total" && row.name != "messages_total") continue;
      std::map<std::string, std::string> l(row.labels.begin(), row.labels.end());
      if (l["direction"] != "sent") continue;
      auto& cell = t.by_type[{l["scope"], l["layer"], l["type"]}];
      (row.name == "bytes_total" ? cell.first : cell.second) += row.value;
    }
    return t;
  }
  Traffic since(const Traffic& before) const {
    Traffic t = *this;
    for (const auto& [key, cell] : before.by_type) {
      t.by_type[key].first -= cell.first;
      t.by_type[key].second -= cell.second;
    }
    return t;
  }
  std::pair<uint64_t, uint64_t> agent_total() const {
    std::pair<uint64_t, uint64_t> total{};
    for (const auto& [key, cell] : by_type) {
      if (std::get<0>(key) != "hop" || !is_agent_layer(std::get<1>(key))) continue;
      total.first += cell.first;
      total.second += cell.second;
    }
    return total;
  }
};

int measure_seconds() {
  const char* env = std::getenv("DEVICE_BENCH_MEASURE_S");
  return env != nullptr ? std::max(4, std::atoi(env)) : 60;
}

// Share of (node, device) views that know the device, and that equal its true state.
std::pair<double, double> view_shares(mesh::sim::MeshSim& sim, const ChargedDevices& world, size_t nodes) {
  size_t known = 0;
  size_t current = 0;
  for (size_t n = 0; n < nodes; ++n) {
    const auto& view = sim.node(n)->device_watcher().view();
    for (const auto& device : world.devices) {
      const auto seen = view.find(device->spec().id);
      if (seen == view.end() || !seen->second.record.known) continue;
      ++known;
      if (seen->second.record.attributes == device->state()) ++current;
    }
  }
  const double pairs = static_cast<double>(nodes * world.devices.size());
  return {static_cast<double>(known) / pairs, static_cast<double>(current) / pairs};
}

// Every node watches every device (true), or nobody does and only the device
// leaders' monitoring runs (the paper's Fig. 11 load without subscribers).
void run_point(benchmark::State& state, bool watchers) {
  mesh::core::log_to_null();
  const auto nodes = static_cast<size_t>(state.range(0));
  const auto device_count = static_cast<size_t>(state.range(1));
  const bool central = state.range(2) == 1;
  const int measure_s = measure_seconds();
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
    scenario.run.duration_s = kSettleCap_s + measure_s;

    // Devices at random access nodes, near them.
    mesh::core::Rng rng(seed * 31 + 7);
    mesh::sim::MeshSim probe(scenario, seed);  // only for the topology
    const auto& topology = probe.topology();
    ChargedDevices world(topology);
    const std::vector<DeviceSpec> catalog = mesh::bench::place_devices(world, topology, device_count, rng);

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
    sim.run_until(TimePoint(seconds(kWatchFrom_s)));
    // Every node watches every device; in the window, record when each view shows a version.
    bool measuring = false;
    std::vector<double> propagation_ms;
    std::vector<double> detection_ms;
    std::map<std::string, double> changed_ms;  // device -> virtual time of its latest change, until detected
    for (size_t n = 0; n < nodes && watchers; ++n) {
      sim.node(n)->device_watcher().watch(
          {}, [&](const std::string& device, const mesh::routine::DeviceWatcher::Seen& seen) {
            if (seen.record.changed_at_us <= 0 || !measuring) return;
            const double committed = static_cast<double>(seen.record.changed_at_us) / 1000.0;
            propagation_ms.push_back(mesh::core::to_millis(sim.simulator().now().time_since_epoch()) - committed);
            const auto change = changed_ms.find(device);
            if (change != changed_ms.end() && committed >= change->second) {
              detection_ms.push_back(committed - change->second);
              changed_ms.erase(change);
            }
          });
    }
    const auto shares = [&] {
      return watchers ? view_shares(sim, world, nodes) : mesh::bench::led_device_shares(sim, world.devices);
    };
    int settle_s = kWatchFrom_s;
    while (settle_s < kSettleCap_s && shares().first < 1.0) {
      sim.run_until(TimePoint(seconds(++settle_s)));
    }
    measuring = true;
    const int end_s = settle_s + measure_s;
    std::vector<Traffic> before;
    for (size_t n = 0; n < nodes; ++n) before.push_back(Traffic::of(sim, n));
    const std::vector<uint64_t> io_bytes_before = world.io_bytes_by_node;
    const std::vector<uint64_t> io_msgs_before = world.io_msgs_by_node;

    for (int t = settle_s; t < end_s; t += kChangeEvery_s) {
      sim.run_until(TimePoint(seconds(t)));
      size_t d = rng.below(device_count);
      while (world.devices[d]->spec().kind != DeviceKind::motion_sensor) d = rng.below(device_count);
      const bool motion = !std::get<bool>(world.devices[d]->state().at("motion"));
      world.devices[d]->set_state({{"motion", motion}});
      changed_ms[world.devices[d]->spec().id] = mesh::core::to_millis(sim.simulator().now().time_since_epoch());
    }
    sim.run_until(TimePoint(seconds(end_s)));
    const auto [observed_share, current_share] = shares();

    // Per node per second over the window: agent layers, and agent plus device I/O.
    const auto window = static_cast<double>(measure_s);
    std::vector<double> agent_bytes, agent_msgs, bytes, msgs;
    std::map<Traffic::Key, std::pair<double, double>> by_type;
    double io_bytes_total = 0;
    double io_msgs_total = 0;
    for (size_t n = 0; n < nodes; ++n) {
      const Traffic traffic = Traffic::of(sim, n).since(before[n]);
      for (const auto& [key, cell] : traffic.by_type) {
        by_type[key].first += static_cast<double>(cell.first);
        by_type[key].second += static_cast<double>(cell.second);
      }
      const auto [agent_b, agent_m] = traffic.agent_total();
      const auto io_b = static_cast<double>(world.io_bytes_by_node[n] - io_bytes_before[n]);
      const auto io_m = static_cast<double>(world.io_msgs_by_node[n] - io_msgs_before[n]);
      io_bytes_total += io_b;
      io_msgs_total += io_m;
      agent_bytes.push_back(static_cast<double>(agent_b) / window);
      agent_msgs.push_back(static_cast<double>(agent_m) / window);
      bytes.push_back((static_cast<double>(agent_b) + io_b) / window);
      msgs.push_back((static_cast<double>(agent_m) + io_m) / window);
    }
    by_type[{"hop", "device_io", "poll"}] = {io_bytes_total, io_msgs_total};
    const auto mean = [&](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(nodes);
    };
    const auto max = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };

    // Load balance (Fig. 6, spatial load): groups hosted and led per node, devices per leader.
    std::vector<double> groups_per_node, groups_led_per_node, devices_per_leader;
    for (size_t n = 0; n < nodes; ++n) {
      const auto replicas = sim.node(n)->kgroups().host().replicas();
      groups_per_node.push_back(static_cast<double>(replicas.size()));
      groups_led_per_node.push_back(
          static_cast<double>(std::count_if(replicas.begin(), replicas.end(), [](const mesh::kgroup::GroupReplica* r) {
            return r->role() == mesh::kgroup::Role::leader;
          })));
      const size_t led = sim.node(n)->device_leaders().led_devices().size();
      if (led > 0) devices_per_leader.push_back(static_cast<double>(led));
    }
    const std::string point = fmt::format("{},{},{}{},{}", nodes, device_count, central ? "central" : "decentralized",
                                          watchers ? "" : "_unwatched", seed);
    if (auto cdf =
            mesh::bench::open_output("DEVICE_BENCH_OUT", "device_load_cdf.csv", "nodes,devices,mode,seed,metric,value");
        cdf.is_open()) {
      for (const auto& [metric, values] :
           {std::pair{"groups_per_node", &groups_per_node}, std::pair{"groups_led_per_node", &groups_led_per_node},
            std::pair{"devices_per_leader", &devices_per_leader}}) {
        for (double v : *values) cdf << point << "," << metric << "," << v << "\n";
      }
    }
    if (auto out =
            mesh::bench::open_output("DEVICE_BENCH_OUT", "device_traffic.csv",
                                     "nodes,devices,mode,seed,scope,layer,type,bytes_per_node_s,msgs_per_node_s");
        out.is_open()) {
      const double per = window * static_cast<double>(nodes);
      for (const auto& [key, cell] : by_type) {
        if (cell.first == 0 && cell.second == 0) continue;
        out << point << "," << std::get<0>(key) << "," << std::get<1>(key) << "," << std::get<2>(key) << ","
            << cell.first / per << "," << cell.second / per << "\n";
      }
    }

    const double rtt_ms = 2.0 * kLinkDelayMs;
    const double bytes_mean = mean(bytes);
    totals["bytes_per_node_s_mean"] += bytes_mean;
    totals["bytes_per_node_s_max"] += max(bytes);
    totals["agent_bytes_per_node_s_max"] += max(agent_bytes);
    totals["msgs_per_node_s_mean"] += mean(msgs);
    totals["msgs_per_node_s_max"] += max(msgs);
    totals["device_io_share"] += bytes_mean > 0 ? io_bytes_total / window / static_cast<double>(nodes) / bytes_mean : 0;
    totals["propagation_p50_rtt"] += quantile(propagation_ms, 0.5) / rtt_ms;
    totals["propagation_p99_rtt"] += quantile(propagation_ms, 0.99) / rtt_ms;
    totals["detection_p50_ms"] += quantile(detection_ms, 0.5);
    totals["groups_per_node_max"] += max(groups_per_node);
    totals["devices_per_leader_max"] += devices_per_leader.empty() ? 0 : max(devices_per_leader);
    totals["settle_s"] += settle_s;
    totals["observed_share"] += observed_share;
    totals["current_share"] += current_share;
  }
  for (const auto& [name, sum] : totals) state.counters[name] = sum / static_cast<double>(runs);
  state.counters["measure_s"] = measure_s;
}

void BM_DeviceMonitoring(benchmark::State& state) { run_point(state, true); }
void BM_DeviceMonitoringUnwatched(benchmark::State& state) { run_point(state, false); }

// nodes, devices, centralized (1) or not (0). The centralized run of each
// point is its baseline.
void device_args(benchmark::internal::Benchmark* b) {
  std::vector<std::pair<int, int>> points = {{25, 16}, {25, 64}, {50, 128}, {100, 250}};
  if (std::getenv("DEVICE_BENCH_LARGE") != nullptr) {
    points.emplace_back(100, 1000);
    points.emplace_back(250, 500);
    points.emplace_back(250, 1000);
  }
  for (const auto& [nodes, devices] : points) {
    for (int central : {0, 1}) b->Args({nodes, devices, central});
  }
}

BENCHMARK(BM_DeviceMonitoring)->Apply(device_args)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_DeviceMonitoringUnwatched)->Apply(device_args)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
