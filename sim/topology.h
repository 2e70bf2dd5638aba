#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mesh::sim {

// Where the nodes are and who hears whom. Positions in metres; edges are
// undirected, stored once with i < j, sorted.
struct Topology {
  std::string kind;
  std::vector<std::array<double, 3>> positions;
  std::vector<std::pair<int, int>> edges;

  size_t size() const { return positions.size(); }
  // Sorted.
  std::vector<int> neighbours(int node) const;
  // Hops from `from` to every node; -1 where unreachable.
  std::vector<int> hop_distances(int from) const;
  bool is_connected() const;
  // Whether the nodes not in `down` still form one connected mesh (the
  // simulation oracles check liveness only where they do).
  bool connected_without(const std::set<size_t>& down) const;
  // {"kind": ..., "nodes": N, "positions": [[x,y,z],...], "edges": [[i,j],...]}
  std::string to_json() const;
};

// Layout constants, in metres.
struct TopologyOptions {
  double spacing = 10.0;      // between grid and line neighbours
  double radio_range = 30.0;  // random and clustered: nodes closer than this are linked
  double mean_degree = 6.0;   // random: the area is sized for this many neighbours on average
  double cluster_radius = 15.0;
};

Topology line(int n, const TopologyOptions& options = {});
Topology grid(int width, int height, const TopologyOptions& options = {});
// A near-square grid of exactly n nodes (the last row may be partial).
Topology grid_for(int n, const TopologyOptions& options = {});
Topology grid3d(int x, int y, int z, const TopologyOptions& options = {});
// Uniform in a square, linked within radio range; resampled, and if still
// disconnected repaired by linking the closest pair of nodes across
// components, so the result is always connected. Deterministic in `seed`.
Topology random_geometric(int n, uint64_t seed, const TopologyOptions& options = {});
// Nodes scattered around `clusters` centres, linked within radio range,
// clusters bridged by their closest node pairs. Deterministic in `seed`.
Topology clustered(int n, int clusters, uint64_t seed, const TopologyOptions& options = {});
// CoMesh's L-shaped line: the first half runs east, the rest north from the
// corner.
Topology lshape(int n, const TopologyOptions& options = {});

// The kinds meshsim and scenarios accept: line, grid, grid3d, random,
// clustered, lshape.
const std::vector<std::string>& topology_kinds();

}  // namespace mesh::sim
