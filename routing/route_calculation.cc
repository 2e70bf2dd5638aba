#include "routing/route_calculation.h"

#include <algorithm>
#include <unordered_map>

namespace mesh::routing::olsr {

std::vector<Route> compute_routes(const RoutingInput& input) {
  // Looked up once per topology edge: hashed (a tree walk of the whole
  // table per lookup grew with the mesh), sorted once at the end.
  std::unordered_map<core::Ipv4Address, Route> table;
  size_t alias_count = 0;
  for (const auto& [main, list] : input.aliases) alias_count += list.size();
  table.reserve(2 * input.symmetric_neighbours.size() + input.two_hop.size() + input.topology.size() + alias_count);

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
  // OLSR's topology set hands them over in this order already.
  if (!std::is_sorted(edges.begin(), edges.end())) std::sort(edges.begin(), edges.end());
  std::vector<core::NodeId> frontier;
  for (const auto& [dest, route] : table) {
    if (route.hops == 2) frontier.push_back(dest);
  }
  std::sort(frontier.begin(), frontier.end());
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
  std::sort(routes.begin(), routes.end(), [](const Route& a, const Route& b) { return a.destination < b.destination; });
  return routes;
}

}  // namespace mesh::routing::olsr
