// OlsrHopDistances against breadth-first search on the true graph, after
// OLSR has converged on a line and on grids.
#include "membership/olsr_hop_distances.h"

#include <algorithm>
#include <deque>

#include <gtest/gtest.h>

#include "core/log.h"
#include "core/metrics.h"
#include "tests/routing/fake_network.h"

namespace mesh::membership {
namespace {

using routing::testing::FakeNetwork;
using routing::testing::ManualEnv;

core::NodeId addr(size_t i) { return core::NodeId::from_octets(10, 0, 0, static_cast<uint8_t>(i + 1)); }

struct OlsrMesh {
  explicit OlsrMesh(size_t n) : net(env, std::chrono::milliseconds(2)) {
    core::set_log_level("warn");
    for (size_t i = 0; i < n; ++i) {
      routing::olsr::OlsrOptions options;
      options.main_address = addr(i);
      metrics.push_back(std::make_unique<core::Metrics>());
      nodes.push_back(
          std::make_unique<routing::olsr::OlsrProtocol>(env, net.add(addr(i)), *metrics.back(), options));
    }
  }
  std::vector<int> bfs(size_t from) const {
    std::vector<int> dist(nodes.size(), -1);
    std::deque<size_t> queue{from};
    dist[from] = 0;
    while (!queue.empty()) {
      const size_t u = queue.front();
      queue.pop_front();
      for (size_t v = 0; v < nodes.size(); ++v) {
        if (dist[v] < 0 && net.connected(addr(u), addr(v))) {
          dist[v] = dist[u] + 1;
          queue.push_back(v);
        }
      }
    }
    return dist;
  }
  ManualEnv env;
  FakeNetwork net;
  std::vector<std::unique_ptr<core::Metrics>> metrics;
  std::vector<std::unique_ptr<routing::olsr::OlsrProtocol>> nodes;
};

void expect_matches_bfs(OlsrMesh& mesh, const char* what) {
  for (auto& n : mesh.nodes) n->start();
  mesh.env.advance(std::chrono::seconds(40));
  for (size_t i = 0; i < mesh.nodes.size(); ++i) {
    OlsrHopDistances distances(mesh.env, *mesh.nodes[i]);
    const auto from_here = mesh.bfs(i);
    for (uint32_t radius = 0; radius <= 3; ++radius) {
      std::vector<core::NodeId> near;
      for (size_t b = 0; b < mesh.nodes.size(); ++b) {
        if (b != i && from_here[b] >= 0 && static_cast<uint32_t>(from_here[b]) <= radius) near.push_back(addr(b));
      }
      std::sort(near.begin(), near.end());
      EXPECT_EQ(distances.nodes_within(radius), near) << what << " at " << i << " within " << radius;
    }
    for (size_t a = 0; a < mesh.nodes.size(); ++a) {
      const auto truth = mesh.bfs(a);
      for (size_t b = 0; b < mesh.nodes.size(); ++b) {
        if (a == i) {
          EXPECT_EQ(distances.hops_to(addr(b)), static_cast<uint32_t>(truth[b])) << what << " " << i << "->" << b;
        }
        auto between = distances.hops_between(addr(a), addr(b));
        ASSERT_TRUE(between.has_value()) << what << " at " << i << ": " << a << "->" << b;
        // OLSR advertises only MPR links, so a path may be a hop longer
        // than the shortest between two other nodes, never shorter.
        EXPECT_GE(*between, static_cast<uint32_t>(truth[b])) << what << " at " << i << ": " << a << "->" << b;
        EXPECT_LE(*between, static_cast<uint32_t>(truth[b]) + 1) << what << " at " << i << ": " << a << "->" << b;
      }
    }
  }
}

TEST(OlsrHopDistances, LineMatchesBfs) {
  OlsrMesh mesh(6);
  for (size_t i = 0; i + 1 < 6; ++i) mesh.net.connect(addr(i), addr(i + 1));
  expect_matches_bfs(mesh, "line");
}

TEST(OlsrHopDistances, GridMatchesBfs) {
  OlsrMesh mesh(16);
  for (size_t i = 0; i < 16; ++i) {
    if (i % 4 != 3) mesh.net.connect(addr(i), addr(i + 1));
    if (i + 4 < 16) mesh.net.connect(addr(i), addr(i + 4));
  }
  expect_matches_bfs(mesh, "grid");
}

// One long-lived OlsrHopDistances, as the agent holds: a cut link must show
// in hops_between() once OLSR has noticed it and a refresh has passed, and a
// mesh that holds still must not make OLSR report topology changes (which
// would rebuild the graph every refresh).
TEST(OlsrHopDistances, FollowsTopologyChanges) {
  OlsrMesh mesh(5);
  for (size_t i = 0; i < 5; ++i) mesh.net.connect(addr(i), addr((i + 1) % 5));
  for (auto& n : mesh.nodes) n->start();
  mesh.env.advance(std::chrono::seconds(40));
  const routing::olsr::OlsrProtocol& olsr = *mesh.nodes[2];
  OlsrHopDistances distances(mesh.env, olsr);
  EXPECT_EQ(distances.hops_between(addr(0), addr(4)), 1u);
  EXPECT_EQ(distances.hops_between(addr(4), addr(1)), 2u);

  const uint64_t settled = olsr.topology_version();
  mesh.env.advance(std::chrono::seconds(30));
  EXPECT_EQ(olsr.topology_version(), settled) << "a static mesh reported topology changes";

  mesh.net.disconnect(addr(0), addr(4));
  mesh.env.advance(std::chrono::seconds(40));
  EXPECT_NE(olsr.topology_version(), settled);
  EXPECT_EQ(distances.hops_between(addr(0), addr(4)), 4u);
  EXPECT_EQ(distances.hops_between(addr(4), addr(1)), 3u);
}

TEST(OlsrHopDistances, UnknownNodeHasNoDistance) {
  OlsrMesh mesh(2);
  mesh.net.connect(addr(0), addr(1));
  for (auto& n : mesh.nodes) n->start();
  mesh.env.advance(std::chrono::seconds(10));
  OlsrHopDistances distances(mesh.env, *mesh.nodes[0]);
  EXPECT_EQ(distances.hops_to(addr(1)), 1u);
  EXPECT_EQ(distances.hops_to(addr(0)), 0u);
  EXPECT_FALSE(distances.hops_to(addr(9)).has_value());
  EXPECT_FALSE(distances.hops_between(addr(1), addr(9)).has_value());
}

}  // namespace
}  // namespace mesh::membership
