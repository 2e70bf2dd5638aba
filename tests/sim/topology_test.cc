#include "sim/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace mesh::sim {
namespace {

void expect_well_formed(const Topology& t) {
  for (const auto& [a, b] : t.edges) {
    EXPECT_LT(a, b);
    EXPECT_GE(a, 0);
    EXPECT_LT(b, static_cast<int>(t.size()));
  }
  EXPECT_TRUE(std::is_sorted(t.edges.begin(), t.edges.end()));
  EXPECT_EQ(std::adjacent_find(t.edges.begin(), t.edges.end()), t.edges.end()) << "duplicate edge";
}

TEST(Topology, LineHasConsecutiveEdgesAndLinearDistances) {
  const Topology t = line(5);
  EXPECT_EQ(t.kind, "line");
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.edges.size(), 4u);
  expect_well_formed(t);
  EXPECT_EQ(t.hop_distances(0), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.hop_distances(2), (std::vector<int>{2, 1, 0, 1, 2}));
  EXPECT_EQ(t.neighbours(2), (std::vector<int>{1, 3}));
  EXPECT_DOUBLE_EQ(t.positions[4][0], 40.0);
}

TEST(Topology, GridDistancesAreManhattan) {
  const int w = 4;
  const int h = 3;
  const Topology t = grid(w, h);
  ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(t.edges.size(), static_cast<size_t>((w - 1) * h + w * (h - 1)));
  expect_well_formed(t);
  const auto dist = t.hop_distances(0);
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(dist[i], i % w + i / w) << "node " << i;
  EXPECT_EQ(t.neighbours(5), (std::vector<int>{1, 4, 6, 9}));
}

TEST(Topology, GridForIsNearSquareAndExact) {
  EXPECT_EQ(grid_for(9).edges, grid(3, 3).edges);
  for (int n = 1; n <= 40; ++n) {
    const Topology t = grid_for(n);
    SCOPED_TRACE("n=" + std::to_string(n));
    EXPECT_EQ(t.size(), static_cast<size_t>(n));
    EXPECT_TRUE(t.is_connected());
    expect_well_formed(t);
  }
}

TEST(Topology, Grid3dHasSixNeighbourLattice) {
  const Topology t = grid3d(2, 3, 4);
  ASSERT_EQ(t.size(), 24u);
  EXPECT_EQ(t.edges.size(), static_cast<size_t>(1 * 3 * 4 + 2 * 2 * 4 + 2 * 3 * 3));
  expect_well_formed(t);
  EXPECT_TRUE(t.is_connected());
  EXPECT_EQ(t.hop_distances(0).back(), 1 + 2 + 3);
  EXPECT_DOUBLE_EQ(t.positions.back()[2], 30.0);
}

TEST(Topology, LshapeTurnsNorthAtTheCorner) {
  const Topology t = lshape(9);
  ASSERT_EQ(t.size(), 9u);
  EXPECT_EQ(t.edges.size(), 8u);
  EXPECT_EQ(t.hop_distances(0).back(), 8);
  // Nodes 0..4 east along y = 0, 5..8 north of node 4.
  EXPECT_DOUBLE_EQ(t.positions[4][0], 40.0);
  EXPECT_DOUBLE_EQ(t.positions[4][1], 0.0);
  EXPECT_DOUBLE_EQ(t.positions[8][0], 40.0);
  EXPECT_DOUBLE_EQ(t.positions[8][1], 40.0);
}

TEST(Topology, RandomGeometricIsConnectedAndDeterministicOver50Seeds) {
  for (int n : {2, 20, 100}) {
    double degree_sum = 0;
    for (uint64_t seed = 1; seed <= 50; ++seed) {
      SCOPED_TRACE("n=" + std::to_string(n) + " seed=" + std::to_string(seed));
      const Topology t = random_geometric(n, seed);
      EXPECT_EQ(t.kind, "random");
      ASSERT_EQ(t.size(), static_cast<size_t>(n));
      EXPECT_TRUE(t.is_connected());
      expect_well_formed(t);
      const Topology again = random_geometric(n, seed);
      EXPECT_EQ(t.edges, again.edges);
      EXPECT_EQ(t.positions, again.positions);
      degree_sum += 2.0 * static_cast<double>(t.edges.size()) / n;
    }
    if (n == 100) {
      // Sized for a mean degree of about 6 (border effects lower it).
      const double mean = degree_sum / 50;
      EXPECT_GT(mean, 3.5);
      EXPECT_LT(mean, 8.0);
    }
  }
  EXPECT_NE(random_geometric(50, 1).positions, random_geometric(50, 2).positions);
}

TEST(Topology, ClusteredIsConnectedOver50Seeds) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const Topology t = clustered(60, 4, seed);
    EXPECT_EQ(t.kind, "clustered");
    ASSERT_EQ(t.size(), 60u);
    EXPECT_TRUE(t.is_connected());
    expect_well_formed(t);
    EXPECT_EQ(t.edges, clustered(60, 4, seed).edges);
  }
}

TEST(Topology, DisconnectedGraphIsDetected) {
  Topology t = line(4);
  t.edges.erase(t.edges.begin() + 1);
  EXPECT_FALSE(t.is_connected());
  EXPECT_EQ(t.hop_distances(0), (std::vector<int>{0, 1, -1, -1}));
}

TEST(Topology, JsonListsPositionsAndEdges) {
  EXPECT_EQ(line(2).to_json(),
            R"({"kind": "line", "nodes": 2, "positions": [[0, 0, 0], [10, 0, 0]], "edges": [[0, 1]]})");
}

}  // namespace
}  // namespace mesh::sim
