#include "routing/route_calculation.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <utility>

namespace mesh::routing::olsr {
namespace {

// The table under construction, keyed by destination, in one array with
// open addressing: a calculation visits every node of the mesh, up to ten
// times a second on every node, and a hashed map allocated (and freed) a node
// per destination each time. Sized for an expected number of routes and
// grown when that was short: sized for every topology edge, its slots (each
// cleared, then scanned) outnumbered the routes several times over.
class RouteTable {
 public:
  explicit RouteTable(size_t expected) { resize(std::bit_ceil(std::max<size_t>(16, 2 * expected))); }

  const Route* find(core::Ipv4Address destination) const {
    const Route& slot = slots_[slot_of(destination)];
    return is_empty(slot) ? nullptr : &slot;
  }
  // Adds `route` unless its destination has one already; whether it did.
  bool try_add(const Route& route) {
    Route& slot = slots_[slot_of(route.destination)];
    if (!is_empty(slot)) return false;
    slot = route;
    // At most half full, so probes stay short and always end.
    if (2 * ++size_ > slots_.size()) resize(2 * slots_.size());
    return true;
  }
  std::vector<Route> sorted_by_destination() const {
    std::vector<Route> routes;
    for (const Route& slot : slots_) {
      if (!is_empty(slot)) routes.push_back(slot);
    }
    std::sort(routes.begin(), routes.end(),
              [](const Route& a, const Route& b) { return a.destination < b.destination; });
    return routes;
  }

 private:
  // Every route is at least one hop long.
  static bool is_empty(const Route& slot) { return slot.hops == 0; }
  // Fibonacci hashing: addresses of one subnet differ in their low bits only.
  size_t slot_of(core::Ipv4Address destination) const {
    constexpr uint64_t kGoldenRatio = 0x9e3779b97f4a7c15;
    size_t i = static_cast<size_t>((uint64_t{destination.value()} * kGoldenRatio) >> shift_);
    while (!is_empty(slots_[i]) && slots_[i].destination != destination) i = (i + 1) & (slots_.size() - 1);
    return i;
  }

  void resize(size_t slots) {
    std::vector<Route> old = std::exchange(slots_, std::vector<Route>(slots));
    shift_ = 64 - std::countr_zero(slots);
    for (const Route& route : old) {
      if (!is_empty(route)) slots_[slot_of(route.destination)] = route;
    }
  }

  std::vector<Route> slots_;
  int shift_ = 0;
  size_t size_ = 0;
};

}  // namespace

std::vector<Route> compute_routes(const RoutingInput& input) {
  // Looked up once per topology edge: hashed (a tree walk of the whole
  // table per lookup grew with the mesh), sorted once at the end. Every
  // route's destination is a neighbour (or its link address), a two-hop
  // neighbour, a topology destination or an alias.
  size_t alias_count = 0;
  for (const auto& [main, list] : input.aliases) alias_count += list.size();
  // About one route per TC originator besides the neighbourhood's: every
  // node with an MPR selector sends TCs.
  size_t originators = 0;
  for (size_t i = 0; i < input.topology.size(); ++i) {
    originators += i == 0 || input.topology[i].last != input.topology[i - 1].last;
  }
  RouteTable table(2 * input.symmetric_neighbours.size() + input.two_hop.size() + originators + alias_count);

  auto neighbours = input.symmetric_neighbours;
  std::sort(neighbours.begin(), neighbours.end(), [](const auto& a, const auto& b) {
    return a.main != b.main ? a.main < b.main : a.link_address < b.link_address;
  });
  for (const auto& n : neighbours) {
    if (n.main == input.self) continue;
    table.try_add(Route{n.main, n.link_address, 1});
    // A neighbour heard on another of its interfaces is reached directly there.
    if (n.link_address != n.main) table.try_add(Route{n.link_address, n.link_address, 1});
  }

  auto two_hop = input.two_hop;
  std::sort(two_hop.begin(), two_hop.end(), [](const auto& a, const auto& b) {
    return a.two_hop != b.two_hop ? a.two_hop < b.two_hop : a.via < b.via;
  });
  // Two-hop destinations start the breadth-first pass below, added here in
  // increasing address order.
  std::vector<core::NodeId> frontier;
  for (const auto& t : two_hop) {
    if (t.two_hop == input.self || table.find(t.two_hop) != nullptr) continue;
    const Route* via = table.find(t.via);
    if (via == nullptr || via->hops != 1) continue;
    table.try_add(Route{t.two_hop, via->next_hop, 2});
    frontier.push_back(t.two_hop);
  }

  // Breadth first over the topology set: destinations at h + 1 hops come
  // from last hops already known at h hops, taken in increasing address
  // order (and their destinations too) so the lowest last hop wins a tie.
  // The edges sorted by (last, dest) serve as each last hop's list, each
  // edge one integer (last above dest) so the searches and the order check
  // compare words, not pairs of addresses.
  auto edge_key = [](core::NodeId last, core::NodeId dest) { return uint64_t{last.value()} << 32 | dest.value(); };
  std::vector<uint64_t> edges;
  edges.reserve(input.topology.size());
  for (const auto& e : input.topology) edges.push_back(edge_key(e.last, e.dest));
  // OLSR's topology set hands them over in this order already.
  if (!std::is_sorted(edges.begin(), edges.end())) std::sort(edges.begin(), edges.end());
  std::vector<core::NodeId> reached;
  for (uint32_t h = 2; !frontier.empty(); ++h) {
    reached.clear();
    for (core::NodeId last : frontier) {
      const core::Ipv4Address next_hop = table.find(last)->next_hop;
      for (auto e = std::lower_bound(edges.begin(), edges.end(), edge_key(last, core::NodeId()));
           e != edges.end() && *e >> 32 == last.value(); ++e) {
        const core::NodeId dest(static_cast<uint32_t>(*e));
        if (dest == input.self) continue;
        if (table.try_add(Route{dest, next_hop, h + 1})) reached.push_back(dest);
      }
    }
    std::sort(reached.begin(), reached.end());
    frontier.swap(reached);
  }

  for (const auto& [main, aliases] : input.aliases) {
    const Route* route = table.find(main);
    if (route == nullptr) continue;
    const Route via_main = *route;
    for (auto alias : aliases) {
      if (alias == input.self) continue;
      table.try_add(Route{alias, via_main.next_hop, via_main.hops});
    }
  }
  return table.sorted_by_destination();
}

}  // namespace mesh::routing::olsr
