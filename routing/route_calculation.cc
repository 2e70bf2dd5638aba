#include "routing/route_calculation.h"

#include <algorithm>

namespace mesh::routing::olsr {

std::vector<Route> compute_routes(const RoutingInput& input) {
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
  // from last hops already known at h hops.
  std::map<core::NodeId, std::vector<core::NodeId>> advertised_by;
  for (const auto& e : input.topology) advertised_by[e.last].push_back(e.dest);
  for (auto& [last, dests] : advertised_by) std::sort(dests.begin(), dests.end());
  for (uint32_t h = 2;; ++h) {
    std::vector<Route> added;
    for (const auto& [last, dests] : advertised_by) {
      auto from = table.find(last);
      if (from == table.end() || from->second.hops != h) continue;
      for (auto dest : dests) {
        if (dest == input.self || table.count(dest)) continue;
        if (std::any_of(added.begin(), added.end(), [&](const Route& r) { return r.destination == dest; })) continue;
        added.push_back(Route{dest, from->second.next_hop, h + 1});
      }
    }
    if (added.empty()) break;
    for (const auto& r : added) table.emplace(r.destination, r);
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

}  // namespace mesh::routing::olsr
