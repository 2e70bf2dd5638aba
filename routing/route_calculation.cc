#include "routing/route_calculation.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <utility>

#include "routing/u64_hash_map.h"

namespace mesh::routing::olsr {

RouteCalculator::Table::Table(size_t expected) { resize(std::bit_ceil(std::max<size_t>(16, 2 * expected))); }

const RouteCalculator::Slot* RouteCalculator::Table::find(core::Ipv4Address destination) const {
  const Slot& slot = slots_[slot_of(destination)];
  return is_empty(slot) ? nullptr : &slot;
}

bool RouteCalculator::Table::try_add(const Slot& slot) {
  Slot& at = slots_[slot_of(slot.route.destination)];
  if (!is_empty(at)) return false;
  at = slot;
  // At most half full, so probes stay short and always end.
  if (2 * ++size_ > slots_.size()) resize(2 * slots_.size());
  return true;
}

void RouteCalculator::Table::sorted_by_destination(std::vector<Slot>& out) const {
  // Sorted as single words (destination above slot index), then gathered:
  // sorting the slots themselves moved five words per swap, at every
  // calculation.
  std::vector<uint64_t> order;
  order.reserve(size_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!is_empty(slots_[i])) order.push_back(uint64_t{slots_[i].route.destination.value()} << 32 | i);
  }
  std::sort(order.begin(), order.end());
  out.clear();
  out.reserve(order.size());
  for (uint64_t key : order) out.push_back(slots_[static_cast<uint32_t>(key)]);
}

size_t RouteCalculator::Table::slot_of(core::Ipv4Address destination) const {
  // Fibonacci hashing: addresses of one subnet differ in their low bits only.
  constexpr uint64_t kGoldenRatio = 0x9e3779b97f4a7c15;
  size_t i = static_cast<size_t>((uint64_t{destination.value()} * kGoldenRatio) >> shift_);
  while (!is_empty(slots_[i]) && slots_[i].route.destination != destination) i = (i + 1) & (slots_.size() - 1);
  return i;
}

void RouteCalculator::Table::resize(size_t slots) {
  std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots));
  shift_ = 64 - std::countr_zero(slots);
  for (const Slot& slot : old) {
    if (!is_empty(slot)) slots_[slot_of(slot.route.destination)] = slot;
  }
}

std::vector<Route> RouteCalculator::compute(const RoutingInput& input) {
  self_ = input.self;
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
  Table table(2 * input.symmetric_neighbours.size() + input.two_hop.size() + originators + alias_count);

  auto neighbours = input.symmetric_neighbours;
  std::sort(neighbours.begin(), neighbours.end(), [](const auto& a, const auto& b) {
    return a.main != b.main ? a.main < b.main : a.link_address < b.link_address;
  });
  for (const auto& n : neighbours) {
    if (n.main == input.self) continue;
    table.try_add(Slot{Route{n.main, n.link_address, 1}, {}, Origin::neighbour});
    // A neighbour heard on another of its interfaces is reached directly there.
    if (n.link_address != n.main) {
      table.try_add(Slot{Route{n.link_address, n.link_address, 1}, {}, Origin::neighbour});
    }
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
    const Slot* via = table.find(t.via);
    if (via == nullptr || via->route.hops != 1) continue;
    table.try_add(Slot{Route{t.two_hop, via->route.next_hop, 2}, {}, Origin::two_hop});
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
  // Where each last hop's edges start: one probe per node the pass expands,
  // where a binary search of every edge of the mesh took most of the
  // calculation's time at 1000 nodes.
  U64HashMap<uint32_t> first_edge_of;
  first_edge_of.reserve(originators);
  for (size_t i = 0; i < edges.size(); ++i) {
    if (i == 0 || edges[i] >> 32 != edges[i - 1] >> 32) first_edge_of.insert(edges[i] >> 32, static_cast<uint32_t>(i));
  }
  std::vector<core::NodeId> reached;
  for (uint32_t h = 2; !frontier.empty(); ++h) {
    reached.clear();
    for (core::NodeId last : frontier) {
      const uint32_t* first = first_edge_of.find(last.value());
      if (first == nullptr) continue;
      const core::Ipv4Address next_hop = table.find(last)->route.next_hop;
      for (auto e = edges.begin() + *first; e != edges.end() && *e >> 32 == last.value(); ++e) {
        const core::NodeId dest(static_cast<uint32_t>(*e));
        if (dest == input.self) continue;
        if (table.try_add(Slot{Route{dest, next_hop, h + 1}, last, Origin::topology})) reached.push_back(dest);
      }
    }
    std::sort(reached.begin(), reached.end());
    frontier.swap(reached);
  }

  for (const auto& [main, aliases] : input.aliases) {
    const Slot* slot = table.find(main);
    if (slot == nullptr) continue;
    const Route via_main = slot->route;
    for (auto alias : aliases) {
      if (alias == input.self) continue;
      table.try_add(Slot{Route{alias, via_main.next_hop, via_main.hops}, {}, Origin::alias});
    }
  }
  table.sorted_by_destination(last_table_);
  std::vector<Route> routes;
  routes.reserve(last_table_.size());
  for (const Slot& slot : last_table_) routes.push_back(slot.route);
  return routes;
}

const RouteCalculator::Slot* RouteCalculator::last_slot(core::Ipv4Address destination) const {
  auto it = std::lower_bound(last_table_.begin(), last_table_.end(), destination,
                             [](const Slot& slot, core::Ipv4Address d) { return slot.route.destination < d; });
  return it != last_table_.end() && it->route.destination == destination ? &*it : nullptr;
}

bool RouteCalculator::edge_change_may_alter(const RoutingInput::TopologyEdge& edge, bool added) const {
  // The pass skips edges to this node, and reads only the edges of the
  // nodes it expands.
  if (edge.dest == self_) return false;
  const Slot* last = last_slot(edge.last);
  if (last == nullptr || (last->origin != Origin::two_hop && last->origin != Origin::topology)) return false;
  const Slot* dest = last_slot(edge.dest);
  if (!added) return dest != nullptr && dest->origin == Origin::topology && dest->last == edge.last;
  // An alias's route comes after the pass, which would now claim it.
  if (dest == nullptr || dest->origin == Origin::alias) return true;
  const uint32_t via_edge = last->route.hops + 1;
  if (dest->route.hops != via_edge) return dest->route.hops > via_edge;
  // At the same level the lowest last hop wins; neighbour and two-hop
  // routes are shorter than any the pass makes.
  return dest->last > edge.last;
}

std::vector<Route> compute_routes(const RoutingInput& input) {
  RouteCalculator calculator;
  return calculator.compute(input);
}

}  // namespace mesh::routing::olsr
