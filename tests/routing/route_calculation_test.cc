#include "routing/route_calculation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

// compute_routes() as it was with an ordered map for its table (before
// issue 17's scaling work hashed it): the reference for the test below.
std::vector<Route> reference_routes(const RoutingInput& input) {
  std::map<core::Ipv4Address, Route> table;

  auto neighbours = input.symmetric_neighbours;
  std::sort(neighbours.begin(), neighbours.end(), [](const auto& a, const auto& b) {
    return a.main != b.main ? a.main < b.main : a.link_address < b.link_address;
  });
  for (const auto& n : neighbours) {
    if (n.main == input.self) continue;
    table.try_emplace(n.main, Route{n.main, n.link_address, 1});
    // A neighbour heard on another of its interfaces is reached directly there.
    if (n.link_address != n.main) table.try_emplace(n.link_address, Route{n.link_address, n.link_address, 1});
  }

  auto two_hop = input.two_hop;
  std::sort(two_hop.begin(), two_hop.end(), [](const auto& a, const auto& b) {
    return a.two_hop != b.two_hop ? a.two_hop < b.two_hop : a.via < b.via;
  });
  for (const auto& t : two_hop) {
    if (t.two_hop == input.self || table.count(t.two_hop)) continue;
    auto via = table.find(t.via);
    if (via == table.end() || via->second.hops != 1) continue;
    table.emplace(t.two_hop, Route{t.two_hop, via->second.next_hop, 2});
  }

  // Breadth first over the topology set: destinations at h + 1 hops come
  // from last hops already known at h hops, taken in increasing address
  // order (and their destinations too) so the lowest last hop wins a tie.
  // The edges sorted by (last, dest) serve as each last hop's list.
  std::vector<std::pair<core::NodeId, core::NodeId>> edges;
  edges.reserve(input.topology.size());
  for (const auto& e : input.topology) edges.emplace_back(e.last, e.dest);
  std::sort(edges.begin(), edges.end());
  std::vector<core::NodeId> frontier;
  for (const auto& [dest, route] : table) {
    if (route.hops == 2) frontier.push_back(dest);
  }
  std::vector<core::NodeId> reached;
  for (uint32_t h = 2; !frontier.empty(); ++h) {
    reached.clear();
    for (core::NodeId last : frontier) {
      const core::Ipv4Address next_hop = table.at(last).next_hop;
      for (auto e = std::lower_bound(edges.begin(), edges.end(), std::pair{last, core::NodeId()});
           e != edges.end() && e->first == last; ++e) {
        const core::NodeId dest = e->second;
        if (dest == input.self) continue;
        if (table.try_emplace(dest, Route{dest, next_hop, h + 1}).second) reached.push_back(dest);
      }
    }
    std::sort(reached.begin(), reached.end());
    frontier.swap(reached);
  }

  for (const auto& [main, aliases] : input.aliases) {
    auto route = table.find(main);
    if (route == table.end()) continue;
    const Route via_main = route->second;
    for (auto alias : aliases) {
      if (alias == input.self) continue;
      table.try_emplace(alias, Route{alias, via_main.next_hop, via_main.hops});
    }
  }

  std::vector<Route> routes;
  routes.reserve(table.size());
  for (const auto& [dest, route] : table) routes.push_back(route);
  return routes;
}

// The hashed table gives the same routes as the ordered one on random
// inputs, consistent or not: random neighbours (some heard on another
// interface), two-hop and topology edges in any order, aliases, and `self`
// among them.
TEST(RouteCalculation, SameRoutesAsTheOrderedTableOnRandomInputs) {
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    core::Rng rng(seed);
    const int nodes = 3 + static_cast<int>(rng.below(60));
    auto any = [&] { return n(static_cast<int>(rng.below(static_cast<uint64_t>(nodes)))); };
    RoutingInput input;
    input.self = any();
    for (uint64_t i = rng.below(8); i > 0; --i) {
      const NodeId main = any();
      input.symmetric_neighbours.push_back(
          {main, rng.below(4) == 0 ? n(1000 + static_cast<int>(rng.below(50))) : main});
    }
    for (uint64_t i = rng.below(30); i > 0; --i) input.two_hop.push_back({any(), any()});
    for (uint64_t i = rng.below(200); i > 0; --i) input.topology.push_back({any(), any()});
    if (rng.below(2) == 0) {
      std::sort(input.topology.begin(), input.topology.end(), [](const auto& a, const auto& b) {
        return std::pair{a.last, a.dest} < std::pair{b.last, b.dest};
      });
    }
    for (uint64_t i = rng.below(5); i > 0; --i)
      input.aliases[any()].push_back(n(2000 + static_cast<int>(rng.below(20))));
    EXPECT_EQ(compute_routes(input), reference_routes(input));
  }
}

// A random RoutingInput as a converged node of a random mesh would hold it,
// plus stray topology edges and aliases, so the breadth-first pass has ties,
// unreached last hops and edges to this node.
RoutingInput random_input(core::Rng& rng, int nodes) {
  auto any = [&] { return static_cast<int>(rng.below(static_cast<uint64_t>(nodes))); };
  Graph g;
  for (int i = 0; i < nodes; ++i) g[i];
  for (int i = 1; i < nodes; ++i) {
    const int other = static_cast<int>(rng.below(static_cast<uint64_t>(i)));
    g[i].insert(other);
    g[other].insert(i);
  }
  for (int extra = static_cast<int>(rng.below(static_cast<uint64_t>(2 * nodes))); extra > 0; --extra) {
    const int a = any();
    const int b = any();
    if (a == b) continue;
    g[a].insert(b);
    g[b].insert(a);
  }
  RoutingInput input = converged_view(0, g);
  for (uint64_t i = rng.below(10); i > 0; --i) input.topology.push_back({n(any()), n(any())});
  for (uint64_t i = rng.below(3); i > 0; --i) input.aliases[n(any())].push_back(n(2000 + any()));
  return input;
}

// A calculation skipped because edge_change_may_alter() answered false for
// every topology change since the last one keeps the table that a
// calculation from scratch gives, through long random sequences of edges
// added and removed in batches (and now and then a neighbourhood change,
// which always calculates, as OlsrProtocol does).
TEST(RouteCalculator, SkippedCalculationsKeepTheTableFromScratch) {
  uint64_t skipped = 0;
  uint64_t calculated = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    core::Rng rng(seed);
    const int nodes = 4 + static_cast<int>(rng.below(60));
    auto any = [&] { return n(static_cast<int>(rng.below(static_cast<uint64_t>(nodes)))); };
    RoutingInput input = random_input(rng, nodes);
    auto key = [](const RoutingInput::TopologyEdge& e) { return std::pair{e.last, e.dest}; };
    std::set<std::pair<NodeId, NodeId>> edges;
    for (const auto& e : input.topology) edges.insert(key(e));
    RouteCalculator calculator;
    std::vector<Route> table = calculator.compute(input);
    for (int step = 0; step < 200; ++step) {
      bool may_alter = false;
      if (rng.below(20) == 0) {
        // A two-hop neighbour more or less: not a topology change.
        if (!input.two_hop.empty() && rng.below(2) == 0) {
          input.two_hop.erase(input.two_hop.begin() + static_cast<ptrdiff_t>(rng.below(input.two_hop.size())));
        } else if (!input.symmetric_neighbours.empty()) {
          input.two_hop.push_back({input.symmetric_neighbours[0].main, any()});
        }
        may_alter = true;
      }
      for (uint64_t i = 1 + rng.below(4); i > 0; --i) {
        RoutingInput::TopologyEdge edge{any(), any()};
        bool added = true;
        if (!edges.empty() && rng.below(2) == 0) {
          auto it = std::next(edges.begin(), static_cast<ptrdiff_t>(rng.below(edges.size())));
          edge = {it->first, it->second};
          added = false;
          edges.erase(it);
        } else if (!edges.insert(key(edge)).second) {
          continue;
        }
        may_alter = may_alter || calculator.edge_change_may_alter(edge, added);
      }
      input.topology.clear();
      for (const auto& [last, dest] : edges) input.topology.push_back({last, dest});
      if (may_alter) {
        table = calculator.compute(input);
        ++calculated;
      } else {
        ++skipped;
      }
      ASSERT_EQ(table, compute_routes(input)) << "step " << step << (may_alter ? " calculated" : " skipped");
    }
  }
  // Both paths were taken often enough to mean something.
  EXPECT_GT(skipped, 10'000u);
  EXPECT_GT(calculated, 10'000u);
}

}  // namespace
}  // namespace mesh::routing::olsr
