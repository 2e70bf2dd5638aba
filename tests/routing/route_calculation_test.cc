#include "routing/route_calculation.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "core/rng.h"

namespace mesh::routing::olsr {
namespace {

using core::NodeId;

NodeId n(int i) { return NodeId::from_octets(10, 0, static_cast<uint8_t>(i / 250), static_cast<uint8_t>(i % 250 + 1)); }

using Graph = std::map<int, std::set<int>>;

// What a converged OLSR node knows about a graph: its neighbours, their
// neighbours, and every node's advertised links (full TC, as with every
// node an MPR selector of someone).
RoutingInput converged_view(int self, const Graph& g) {
  RoutingInput in;
  in.self = n(self);
  for (int nb : g.at(self)) {
    in.symmetric_neighbours.push_back({n(nb), n(nb)});
    for (int t : g.at(nb)) in.two_hop.push_back({n(nb), n(t)});
  }
  for (const auto& [node, nbs] : g) {
    for (int d : nbs) in.topology.push_back({n(node), n(d)});
  }
  return in;
}

std::map<int, int> bfs(int from, const Graph& g) {
  std::map<int, int> dist{{from, 0}};
  std::deque<int> q{from};
  while (!q.empty()) {
    int u = q.front();
    q.pop_front();
    for (int v : g.at(u)) {
      if (!dist.count(v)) {
        dist[v] = dist[u] + 1;
        q.push_back(v);
      }
    }
  }
  return dist;
}

TEST(RouteCalculation, LineOfFive) {
  Graph g{{0, {1}}, {1, {0, 2}}, {2, {1, 3}}, {3, {2, 4}}, {4, {3}}};
  const auto routes = compute_routes(converged_view(0, g));
  ASSERT_EQ(routes.size(), 4u);
  for (const auto& r : routes) EXPECT_EQ(r.next_hop, n(1));
  EXPECT_EQ(routes.back(), (Route{n(4), n(1), 4}));
}

TEST(RouteCalculation, MidAliasesFollowTheirMainAddress) {
  Graph g{{0, {1}}, {1, {0, 2}}, {2, {1}}};
  auto in = converged_view(0, g);
  const auto alias = core::Ipv4Address::from_octets(192, 168, 9, 9);
  in.aliases[n(2)] = {alias};
  const auto routes = compute_routes(in);
  auto it = std::find_if(routes.begin(), routes.end(), [&](const Route& r) { return r.destination == alias; });
  ASSERT_NE(it, routes.end());
  EXPECT_EQ(*it, (Route{alias, n(1), 2}));
}

TEST(RouteCalculation, TopologyWithoutAPathToItsLastHopIsIgnored) {
  RoutingInput in;
  in.self = n(0);
  in.topology.push_back({n(5), n(6)});
  EXPECT_TRUE(compute_routes(in).empty());
}

TEST(RouteCalculation, RandomGraphsGiveBfsShortestPaths) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    core::Rng rng(seed);
    const int nodes = 5 + static_cast<int>(rng.below(40));
    Graph g;
    for (int i = 0; i < nodes; ++i) g[i];
    for (int i = 1; i < nodes; ++i) {  // a random tree keeps it connected
      const int parent = static_cast<int>(rng.below(static_cast<uint64_t>(i)));
      g[i].insert(parent);
      g[parent].insert(i);
    }
    for (int extra = 0; extra < nodes / 2; ++extra) {
      const int a = static_cast<int>(rng.below(nodes)), b = static_cast<int>(rng.below(nodes));
      if (a == b) continue;
      g[a].insert(b);
      g[b].insert(a);
    }
    const int self = static_cast<int>(rng.below(nodes));
    const auto routes = compute_routes(converged_view(self, g));
    const auto dist = bfs(self, g);
    ASSERT_EQ(routes.size(), dist.size() - 1);
    for (const auto& r : routes) {
      int dest = -1;
      for (const auto& [i, d] : dist) {
        if (n(i) == r.destination) dest = i;
      }
      ASSERT_GE(dest, 0);
      EXPECT_EQ(static_cast<int>(r.hops), dist.at(dest)) << r.destination.to_string();
      // The next hop is a neighbour one hop closer to the destination.
      int next = -1;
      for (int nb : g.at(self)) {
        if (n(nb) == r.next_hop) next = nb;
      }
      ASSERT_GE(next, 0);
      EXPECT_EQ(bfs(next, g).at(dest), dist.at(dest) - 1);
    }
  }
}

}  // namespace
}  // namespace mesh::routing::olsr
