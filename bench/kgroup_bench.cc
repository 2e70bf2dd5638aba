// k-group selection on grids (CoMesh Table 2 and Fig. 2(c)): for N smart
// nodes on a near-square 2D grid, and on a near-cubic 3D grid (the paper's
// simulations use 3D grids), 10 m apart, groups of k = 5 for random device
// positions in the grid's bounding box, selected by LSH (m = 2, l = 2, r = 4 grid units) and by plain
// hashing in the same run. Counters: LSH candidates per group (paper, Table
// 2: 13.0, 34.1, 50.8, 52.8, 66.9 for N = 50 ... 1000), and quorum distance,
// the hops from the leader to the f-th nearest other member (the last
// acknowledgement a quorum of f + 1 needs), for LSH and for hashing, with
// their ratio. Timings: one selection per iteration.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/rng.h"
#include "kgroup/hash_selection.h"
#include "kgroup/lsh_selection.h"
#include "sim/network.h"
#include "sim/topology.h"

namespace {

using mesh::kgroup::GroupTarget;
using mesh::kgroup::ScoredMember;
using mesh::kgroup::SmartNode;
using mesh::kgroup::TargetKind;

constexpr size_t kGroupSize = 5;

struct Mesh {
  mesh::sim::Topology topology;
  std::vector<SmartNode> nodes;
};

Mesh mesh_of(mesh::sim::Topology topology) {
  Mesh mesh{std::move(topology), {}};
  for (size_t i = 0; i < mesh.topology.size(); ++i) {
    mesh.nodes.push_back({mesh::sim::Network::address_of(i), mesh.topology.positions[i]});
  }
  return mesh;
}

Mesh grid_mesh(int n) { return mesh_of(mesh::sim::grid_for(n)); }

// The first n nodes of the smallest cube holding n: whole layers and one
// partial layer, still connected.
Mesh grid3d_mesh(int n) {
  int side = 1;
  while (side * side * side < n) ++side;
  mesh::sim::Topology cube = mesh::sim::grid3d(side, side, side);
  cube.positions.resize(static_cast<size_t>(n));
  std::erase_if(cube.edges, [n](const std::pair<int, int>& e) { return e.second >= n; });
  return mesh_of(std::move(cube));
}

size_t index_of(const Mesh& mesh, mesh::core::NodeId id) {
  for (size_t i = 0; i < mesh.nodes.size(); ++i) {
    if (mesh.nodes[i].id == id) return i;
  }
  return 0;
}

// Hops from the leader (members.front()) to its f-th nearest other member.
double quorum_hops(const Mesh& mesh, const std::vector<ScoredMember>& members) {
  const std::vector<int> hops = mesh.topology.hop_distances(static_cast<int>(index_of(mesh, members.front().id)));
  std::vector<int> others;
  for (size_t i = 1; i < members.size(); ++i) others.push_back(hops[index_of(mesh, members[i].id)]);
  std::sort(others.begin(), others.end());
  const size_t f = mesh::kgroup::faults_tolerated(members.size());
  return f == 0 ? 0.0 : static_cast<double>(others[f - 1]);
}

void select_on(benchmark::State& state, const Mesh& mesh) {
  mesh::kgroup::Location extent{};
  for (const auto& p : mesh.topology.positions) {
    for (size_t d = 0; d < 3; ++d) extent[d] = std::max(extent[d], p[d]);
  }
  mesh::kgroup::LshParams params;
  params.seed = 1;
  mesh::core::Rng rng(7);
  double candidates = 0;
  double lsh_hops = 0;
  double hash_hops = 0;
  uint64_t groups = 0;
  for (auto _ : state) {
    const GroupTarget target{TargetKind::device, "d" + std::to_string(groups)};
    const mesh::kgroup::Location centre{rng.unit() * extent[0], rng.unit() * extent[1], rng.unit() * extent[2]};
    const auto lsh = mesh::kgroup::lsh_select(mesh.nodes, target, 0, kGroupSize, centre, {}, params);
    benchmark::DoNotOptimize(lsh);
    state.PauseTiming();
    const auto hashed = mesh::kgroup::hash_select(mesh.nodes, target, 0, kGroupSize);
    candidates += static_cast<double>(lsh.candidates);
    lsh_hops += quorum_hops(mesh, lsh.members);
    hash_hops += quorum_hops(mesh, hashed);
    ++groups;
    state.ResumeTiming();
  }
  const double n = static_cast<double>(std::max<uint64_t>(groups, 1));
  state.counters["lsh_candidates"] = candidates / n;
  state.counters["lsh_quorum_hops"] = lsh_hops / n;
  state.counters["hash_quorum_hops"] = hash_hops / n;
  state.counters["hash_over_lsh_hops"] = lsh_hops > 0 ? hash_hops / lsh_hops : 0.0;
}

void BM_GroupSelectionOnGrid(benchmark::State& state) { select_on(state, grid_mesh(static_cast<int>(state.range(0)))); }
BENCHMARK(BM_GroupSelectionOnGrid)->Arg(50)->Arg(250)->Arg(500)->Arg(750)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_GroupSelectionOn3dGrid(benchmark::State& state) {
  select_on(state, grid3d_mesh(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_GroupSelectionOn3dGrid)->Arg(50)->Arg(250)->Arg(500)->Arg(750)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_HashSelection(benchmark::State& state) {
  const Mesh mesh = grid_mesh(static_cast<int>(state.range(0)));
  uint64_t i = 0;
  for (auto _ : state) {
    const GroupTarget target{TargetKind::routine, "r" + std::to_string(i++)};
    benchmark::DoNotOptimize(mesh::kgroup::hash_select(mesh.nodes, target, 0, kGroupSize));
  }
}
BENCHMARK(BM_HashSelection)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
