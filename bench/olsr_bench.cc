// OLSR's control plane in meshsim, against classic flooding in the same run.
//
// For a mesh of N nodes (argument), each benchmark boots the whole mesh of
// real agent::Nodes and reports, in virtual time:
//   convergence_s               from the first boot until every node's routing
//                               table equals BFS shortest paths
//   control_bytes_per_node_s    OLSR bytes sent per node per second over the
//                               20 s after convergence (HELLO, TC, MID, HNA;
//                               forwarded TCs included)
//   tc_bytes_per_node_s         the TC share of it
// BM_OlsrMprFlooding/N is RFC 3626 (TCs list MPR selectors and only MPRs
// retransmit); BM_ClassicFloodingBaseline/N is the same agent with
// OlsrOptions::mpr_flooding = false (TCs list every neighbour and every node
// retransmits every TC once). Read the ratio of the counters at equal N:
//   control ratio = control_bytes_per_node_s(MPR) / (Baseline)
// BM_OlsrPacking/N measures message packing (OlsrOptions::pack_messages):
// the same mesh, seed and 60 s window run twice, packed and unpacked (one
// message a packet, each periodic message on its own timer, RFC 3626's plain
// emission), and reports per node per 60 s
//   packets, bytes                  packed: OLSR packets and their UDP payload
//   unpacked_packets, unpacked_bytes
//   packet_ratio, byte_ratio        packed / unpacked, in the same run
//   busiest_packets, busiest_bytes  the node that sent the most packets (then
//                                   bytes), packed
// on a line of 3 (issue 17's testbed: olsrd's middle node sent 67 packets,
// 6,464 bytes with IP and UDP headers) and a 5x5 grid. Bytes here are OLSR
// payload only; add 28 per packet for IPv4 + UDP.
// Wall time is how long the simulation took and means nothing here.
//
//   build/bench/olsr_bench --benchmark_format=csv > olsr.csv
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/log.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::core::Duration;
using mesh::core::TimePoint;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Duration kStep = milliseconds(250);
constexpr Duration kConvergenceCap = seconds(120);
constexpr Duration kSteadyWindow = seconds(20);

mesh::sim::Scenario mesh_of(const std::string& kind, int nodes) {
  mesh::sim::Scenario s;
  s.source = "bench-" + kind;
  s.topology.kind = kind;
  s.topology.nodes = nodes;
  s.link.delay_ms = 5;
  s.link.jitter_ms = 2;
  s.run.duration_s = 600;
  return s;
}

// Hop counts between all pairs of the grid.
std::vector<std::vector<int>> all_distances(const mesh::sim::Topology& topology) {
  std::vector<std::vector<int>> dist;
  for (size_t i = 0; i < topology.size(); ++i) dist.push_back(topology.hop_distances(static_cast<int>(i)));
  return dist;
}

bool converged(mesh::sim::MeshSim& sim, const std::vector<std::vector<int>>& dist) {
  for (size_t i = 0; i < sim.size(); ++i) {
    const mesh::agent::Node* node = sim.node(i);
    if (node == nullptr) return false;
    const auto routes = node->olsr().routes();
    if (routes.size() + 1 != sim.size()) return false;
    for (const auto& route : routes) {
      for (size_t j = 0; j < sim.size(); ++j) {
        if (sim.id_of(j) == route.destination && static_cast<int>(route.hops) != dist[i][j]) return false;
      }
    }
  }
  return true;
}

// OLSR bytes sent by every node so far, all types and per type.
std::map<std::string, uint64_t> olsr_bytes_sent(mesh::sim::MeshSim& sim) {
  std::map<std::string, uint64_t> out;
  for (size_t i = 0; i < sim.size(); ++i) {
    const mesh::agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    for (const auto& row : node->metrics().counters()) {
      if (row.name != "bytes_total") continue;
      std::map<std::string, std::string> labels(row.labels.begin(), row.labels.end());
      if (labels["layer"] != "olsr" || labels["direction"] != "sent") continue;
      out["all"] += row.value;
      out[labels["type"]] += row.value;
    }
  }
  return out;
}

void run_mesh(benchmark::State& state, const std::string& kind, bool mpr_flooding) {
  mesh::core::log_to_null();
  const int nodes = static_cast<int>(state.range(0));
  const mesh::sim::Scenario scenario = mesh_of(kind, nodes);
  double convergence_s = 0;
  double control = 0;
  double tc = 0;
  uint64_t failed = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    mesh::sim::MeshSim::Options options;
    options.configure = [mpr_flooding](mesh::agent::NodeConfig& config) { config.routing.mpr_flooding = mpr_flooding; };
    mesh::sim::MeshSim sim(scenario, seed++, options);
    const auto dist = all_distances(sim.topology());
    TimePoint t{};
    while (t < TimePoint(kConvergenceCap)) {
      t += kStep;
      sim.run_until(t);
      if (converged(sim, dist)) break;
    }
    if (!converged(sim, dist)) ++failed;
    convergence_s += mesh::core::to_seconds(t.time_since_epoch());
    auto before = olsr_bytes_sent(sim);
    sim.run_until(t + kSteadyWindow);
    auto after = olsr_bytes_sent(sim);
    const double per_node_s = static_cast<double>(nodes) * mesh::core::to_seconds(kSteadyWindow);
    control += static_cast<double>(after["all"] - before["all"]) / per_node_s;
    tc += static_cast<double>(after["tc"] - before["tc"]) / per_node_s;
  }
  state.counters["nodes"] = nodes;
  state.counters["convergence_s"] = benchmark::Counter(convergence_s, benchmark::Counter::kAvgIterations);
  state.counters["control_bytes_per_node_s"] = benchmark::Counter(control, benchmark::Counter::kAvgIterations);
  state.counters["tc_bytes_per_node_s"] = benchmark::Counter(tc, benchmark::Counter::kAvgIterations);
  state.counters["not_converged"] = static_cast<double>(failed);
}

struct PacketTally {
  double packets_per_node = 0;
  double bytes_per_node = 0;
  double busiest_packets = 0;
  double busiest_bytes = 0;
};

uint64_t sent_counter(const mesh::agent::Node& node, const std::string& name) {
  for (const auto& row : node.metrics().counters()) {
    if (row.name == name) return row.value;
  }
  return 0;
}

// Boots the mesh, lets it settle for 30 s, then counts the OLSR packets every
// node sends over 60 s.
PacketTally count_packets(const mesh::sim::Scenario& scenario, uint64_t seed, bool pack) {
  mesh::sim::MeshSim::Options options;
  options.configure = [pack](mesh::agent::NodeConfig& config) { config.routing.pack_messages = pack; };
  mesh::sim::MeshSim sim(scenario, seed, options);
  constexpr Duration kSettle = seconds(30);
  constexpr Duration kWindow = seconds(60);
  sim.run_until(TimePoint(kSettle));
  std::vector<std::pair<uint64_t, uint64_t>> before;
  for (size_t i = 0; i < sim.size(); ++i) {
    const mesh::agent::Node* node = sim.node(i);
    before.emplace_back(node ? sent_counter(*node, "olsr_packets_total") : 0,
                        node ? sent_counter(*node, "olsr_packet_bytes_total") : 0);
  }
  sim.run_until(TimePoint(kSettle + kWindow));
  PacketTally tally;
  for (size_t i = 0; i < sim.size(); ++i) {
    const mesh::agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    const auto packets = static_cast<double>(sent_counter(*node, "olsr_packets_total") - before[i].first);
    const auto bytes = static_cast<double>(sent_counter(*node, "olsr_packet_bytes_total") - before[i].second);
    tally.packets_per_node += packets / static_cast<double>(sim.size());
    tally.bytes_per_node += bytes / static_cast<double>(sim.size());
    if (packets > tally.busiest_packets || (packets == tally.busiest_packets && bytes > tally.busiest_bytes)) {
      tally.busiest_packets = packets;
      tally.busiest_bytes = bytes;
    }
  }
  return tally;
}

void run_packing(benchmark::State& state, const std::string& kind) {
  mesh::core::log_to_null();
  const int nodes = static_cast<int>(state.range(0));
  const mesh::sim::Scenario scenario = mesh_of(kind, nodes);
  PacketTally packed;
  PacketTally unpacked;
  uint64_t seed = 1;
  for (auto _ : state) {
    packed = count_packets(scenario, seed, true);
    unpacked = count_packets(scenario, seed, false);
    ++seed;
  }
  state.counters["nodes"] = nodes;
  state.counters["packets"] = packed.packets_per_node;
  state.counters["bytes"] = packed.bytes_per_node;
  state.counters["unpacked_packets"] = unpacked.packets_per_node;
  state.counters["unpacked_bytes"] = unpacked.bytes_per_node;
  state.counters["packet_ratio"] = packed.packets_per_node / unpacked.packets_per_node;
  state.counters["byte_ratio"] = packed.bytes_per_node / unpacked.bytes_per_node;
  state.counters["busiest_packets"] = packed.busiest_packets;
  state.counters["busiest_bytes"] = packed.busiest_bytes;
}

void BM_OlsrMprFlooding(benchmark::State& state) { run_mesh(state, "grid", true); }
void BM_ClassicFloodingBaseline(benchmark::State& state) { run_mesh(state, "grid", false); }
// A grid is MPR flooding's worst case: every straight two-hop neighbour has
// one way in, so each node picks all four neighbours as MPRs. Random
// geometric meshes (mean degree 6) show the usual case.
void BM_OlsrMprFloodingRandom(benchmark::State& state) { run_mesh(state, "random", true); }
void BM_ClassicFloodingRandomBaseline(benchmark::State& state) { run_mesh(state, "random", false); }

void BM_OlsrPackingLine(benchmark::State& state) { run_packing(state, "line"); }
void BM_OlsrPackingGrid(benchmark::State& state) { run_packing(state, "grid"); }

// Grids of 25, 100, 225 and 400 nodes: 5x5 up to 20x20.
BENCHMARK(BM_OlsrMprFlooding)->Arg(25)->Arg(100)->Arg(225)->Arg(400)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_ClassicFloodingBaseline)->Arg(25)->Arg(100)->Arg(225)->Arg(400)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_OlsrMprFloodingRandom)->Arg(100)->Arg(225)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_ClassicFloodingRandomBaseline)->Arg(100)->Arg(225)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_OlsrPackingLine)->Arg(3)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_OlsrPackingGrid)->Arg(25)->Arg(100)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
