// One agent's heap inside a whole mesh (issue 17: an agent's private memory
// bounded per member; meshsim's memory per simulated node). Every heap
// allocation of this process is charged to the simulated node running when
// it was made (sim/running_node.h: its timers, datagrams delivered to it, its
// boot) and released from that node when freed, wherever that happens. A
// node's live bytes are then exactly what that agent's protocol state holds
// (member table, OLSR sets and routes, dedupe and flood caches, metrics,
// k-group state, its MemoryStorage, which a real agent keeps on disk)
// without the simulator's own bookkeeping, which is charged to no node.
//
// Baseline: none. Live bytes are a pure function of (scenario, seed), not of
// the machine, so they are reported as they are (B per node: mean, p50, max;
// B per member = mean / members seen). The whole process's peak heap over
// the nodes is meshsim's memory per simulated node. The real agent process
// adds its runtime (asio, spdlog, protobuf's descriptors, glibc arenas) to
// this: bench/README.md ("Agent memory") measures that on a running agent.
//
// BM_AgentMemory/nodes: random topology, 2 % loss, pings every second
// (issue 17's scenario), AGENT_MEMORY_BENCH_S virtual seconds (120) so
// Medley's view and OLSR's topology have converged; AGENT_MEMORY_BENCH_LARGE=1
// adds 500 nodes. BM_AgentMemoryWithDevices/nodes/devices: the same mesh
// with emulated plugs and sensors in k = 3 LSH device groups (25 devices per
// cluster, as device_bench), every node watching none; bytes_per_group is
// the least-squares slope of a node's live bytes against the groups it hosts
// (every node of one run, so the mesh's own share is the intercept).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "bench/bench_output.h"
#include "bench/charged_devices.h"
#include "core/log.h"
#include "core/rng.h"
#include "sim/mesh_sim.h"
#include "sim/running_node.h"
#include "sim/scenario.h"

namespace {

// Live bytes per node index; the last slot holds what no node owns.
constexpr size_t kMaxNodes = 4096;
constexpr size_t kUnowned = kMaxNodes;
std::array<int64_t, kMaxNodes + 1> g_live{};
int64_t g_total_live = 0;
int64_t g_total_peak = 0;

// Each block carries who owns it and its size, so a free is charged back to
// the node that allocated, even when another node's code (or the simulator)
// frees it. 16 bytes keep the user pointer aligned for max_align_t.
struct alignas(16) BlockHeader {
  uint64_t size;
  uint64_t owner;
};
static_assert(sizeof(BlockHeader) == 16);

size_t owner_now() {
  const int32_t node = mesh::sim::running_node();
  return node >= 0 && static_cast<size_t>(node) < kMaxNodes ? static_cast<size_t>(node) : kUnowned;
}

void* charged_alloc(size_t size) {
  auto* header = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + size));
  if (header == nullptr) throw std::bad_alloc();
  header->size = size;
  header->owner = owner_now();
  g_live[header->owner] += static_cast<int64_t>(size);
  g_total_live += static_cast<int64_t>(size);
  g_total_peak = std::max(g_total_peak, g_total_live);
  return header + 1;
}

void charged_free(void* p) noexcept {
  if (p == nullptr) return;
  auto* header = static_cast<BlockHeader*>(p) - 1;
  g_live[header->owner] -= static_cast<int64_t>(header->size);
  g_total_live -= static_cast<int64_t>(header->size);
  std::free(header);
}

}  // namespace

// The array, nothrow and sized forms fall back to these in libstdc++; the
// over-aligned forms keep their own allocator and are not charged (nothing
// in the agent over-aligns).
void* operator new(size_t size) { return charged_alloc(size); }
void operator delete(void* p) noexcept { charged_free(p); }
void operator delete(void* p, size_t) noexcept { charged_free(p); }

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoll(value) : fallback;
}

mesh::sim::Scenario mesh_of(int64_t nodes) {
  mesh::sim::Scenario s;
  s.source = "agent-memory-" + std::to_string(nodes);
  s.topology.kind = "random";
  s.topology.nodes = static_cast<uint32_t>(nodes);
  s.link.delay_ms = 2;
  s.link.jitter_ms = 2;
  s.link.loss = 0.02;
  s.run.duration_s = static_cast<double>(env_int("AGENT_MEMORY_BENCH_S", 120));
  s.workload.ping_interval_ms = 1000;
  return s;
}

void BM_AgentMemory(benchmark::State& state) {
  mesh::core::log_to_null();
  const int64_t nodes = state.range(0);
  const mesh::sim::Scenario scenario = mesh_of(nodes);
  std::vector<double> live;
  double members_seen = 0;
  double process_peak = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    g_total_peak = g_total_live;
    const int64_t before = g_total_live;
    {
      mesh::sim::MeshSim sim(scenario, seed++);
      sim.run();
      state.PauseTiming();
      live.clear();
      members_seen = 0;
      for (size_t i = 0; i < sim.size(); ++i) {
        live.push_back(static_cast<double>(g_live[i]));
        if (mesh::agent::Node* node = sim.node(i)) {
          members_seen += static_cast<double>(node->members().live_members().size());
        }
      }
      members_seen /= static_cast<double>(sim.size());
      process_peak = static_cast<double>(g_total_peak - before);
      state.ResumeTiming();
    }
    std::fill(g_live.begin(), g_live.begin() + nodes, 0);
  }
  double mean = 0;
  for (double v : live) mean += v;
  mean /= static_cast<double>(live.size());
  state.counters["node_bytes_mean"] = mean;
  state.counters["node_bytes_p50"] = mesh::bench::quantile(live, 0.5);
  state.counters["node_bytes_max"] = mesh::bench::quantile(live, 1.0);
  state.counters["members_seen"] = members_seen;
  state.counters["bytes_per_member"] = members_seen > 0 ? mean / members_seen : 0;
  state.counters["process_peak_per_node"] = process_peak / static_cast<double>(nodes);
  if (auto out = mesh::bench::open_output("AGENT_MEMORY_BENCH_OUT", "agent_memory.csv", "nodes,node,live_bytes")) {
    for (size_t i = 0; i < live.size(); ++i) out << nodes << "," << i << "," << live[i] << "\n";
  }
}

// Live bytes of each node and the k-group replicas it hosts, at the end of
// a run with `device_count` devices (none: no groups but the mesh's own).
struct NodeLoad {
  std::vector<double> live;
  std::vector<double> groups;
  double members_seen = 0;
};

NodeLoad run_with_devices(const mesh::sim::Scenario& scenario, uint64_t seed, size_t device_count) {
  mesh::sim::MeshSim probe(scenario, seed);  // only for the topology
  const auto& topology = probe.topology();
  const auto nodes = static_cast<size_t>(topology.size());
  mesh::bench::ChargedDevices world(topology);
  mesh::core::Rng rng(seed * 31 + 7);
  const std::vector<mesh::routine::DeviceSpec> catalog = mesh::bench::place_devices(world, topology, device_count, rng);
  std::vector<std::unique_ptr<mesh::bench::ChargedFactory>> factories;
  mesh::sim::MeshSim::Options options;
  options.configure = [&](mesh::agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = mesh::kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 25;
    config.devices.catalog = catalog;
    config.devices.catalog_digest = "bench";
  };
  options.drivers = [&](size_t index, mesh::core::Env& env) {
    factories.push_back(std::make_unique<mesh::bench::ChargedFactory>(env, world, index));
    return factories.back().get();
  };
  NodeLoad load;
  {
    mesh::sim::MeshSim sim(scenario, seed, options);
    sim.run();
    for (size_t i = 0; i < nodes; ++i) {
      load.live.push_back(static_cast<double>(g_live[i]));
      mesh::agent::Node* node = sim.node(i);
      load.groups.push_back(node ? static_cast<double>(node->kgroups().host().replicas().size()) : 0.0);
      if (node) load.members_seen += static_cast<double>(node->members().live_members().size());
    }
    load.members_seen /= static_cast<double>(nodes);
  }
  std::fill(g_live.begin(), g_live.begin() + static_cast<std::ptrdiff_t>(nodes), 0);
  return load;
}

// Slope of y against x by least squares (0 when x does not vary).
double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / n;
    my += y[i] / n;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

void BM_AgentMemoryWithDevices(benchmark::State& state) {
  mesh::core::log_to_null();
  const mesh::sim::Scenario scenario = mesh_of(state.range(0));
  NodeLoad load;
  uint64_t seed = 1;
  for (auto _ : state) load = run_with_devices(scenario, seed++, static_cast<size_t>(state.range(1)));
  double mean = 0, groups = 0;
  for (size_t i = 0; i < load.live.size(); ++i) {
    mean += load.live[i] / static_cast<double>(load.live.size());
    groups += load.groups[i] / static_cast<double>(load.live.size());
  }
  state.counters["node_bytes_mean"] = mean;
  state.counters["node_bytes_max"] = mesh::bench::quantile(load.live, 1.0);
  state.counters["groups_per_node_mean"] = groups;
  state.counters["groups_per_node_max"] = mesh::bench::quantile(load.groups, 1.0);
  state.counters["bytes_per_group"] = slope(load.groups, load.live);
  state.counters["members_seen"] = load.members_seen;
}
BENCHMARK(BM_AgentMemoryWithDevices)
    ->Args({50, 64})
    ->Args({50, 256})
    ->Args({100, 256})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

void Points(benchmark::internal::Benchmark* b) {
  for (int64_t nodes : {25, 100, 250}) b->Arg(nodes);
  if (env_int("AGENT_MEMORY_BENCH_LARGE", 0) != 0) b->Arg(500);
}
BENCHMARK(BM_AgentMemory)->Apply(Points)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
