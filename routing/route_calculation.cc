#include "routing/route_calculation.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <utility>

namespace mesh::routing::olsr {

void RouteCalculator::Table::reset(size_t expected) {
  const size_t wanted = std::bit_ceil(std::max<size_t>(16, 2 * expected));
  // Kept at its size unless short, or so large that clearing and scanning
  // it would cost more than the routes: the mesh changes slowly.
  const size_t slots = slots_.size() < wanted || slots_.size() > 4 * wanted ? wanted : slots_.size();
  slots_.assign(slots, Slot{});
  shift_ = 64 - std::countr_zero(slots);
  size_ = 0;
}

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

void RouteCalculator::Table::sorted_by_destination(std::vector<Route>& out) const {
  out.clear();
  for (const Slot& slot : slots_) {
    if (!is_empty(slot)) out.push_back(slot.route);
  }
  std::sort(out.begin(), out.end(), [](const Route& a, const Route& b) { return a.destination < b.destination; });
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

const std::vector<Route>& RouteCalculator::compute(const RoutingInput& input) {
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
  table_.reset(2 * input.symmetric_neighbours.size() + input.two_hop.size() + originators + alias_count);

  neighbours_.assign(input.symmetric_neighbours.begin(), input.symmetric_neighbours.end());
  std::sort(neighbours_.begin(), neighbours_.end(), [](const auto& a, const auto& b) {
    return a.main != b.main ? a.main < b.main : a.link_address < b.link_address;
  });
  for (const auto& n : neighbours_) {
    if (n.main == input.self) continue;
    table_.try_add(Slot{Route{n.main, n.link_address, 1}, {}, Origin::neighbour});
    // A neighbour heard on another of its interfaces is reached directly there.
    if (n.link_address != n.main) {
      table_.try_add(Slot{Route{n.link_address, n.link_address, 1}, {}, Origin::neighbour});
    }
  }

  two_hop_.assign(input.two_hop.begin(), input.two_hop.end());
  std::sort(two_hop_.begin(), two_hop_.end(), [](const auto& a, const auto& b) {
    return a.two_hop != b.two_hop ? a.two_hop < b.two_hop : a.via < b.via;
  });
  // Two-hop destinations start the breadth-first pass below, added here in
  // increasing address order.
  frontier_.clear();
  for (const auto& t : two_hop_) {
    if (t.two_hop == input.self || table_.find(t.two_hop) != nullptr) continue;
    const Slot* via = table_.find(t.via);
    if (via == nullptr || via->route.hops != 1) continue;
    table_.try_add(Slot{Route{t.two_hop, via->route.next_hop, 2}, {}, Origin::two_hop});
    frontier_.push_back(t.two_hop);
  }

  // Breadth first over the topology set: destinations at h + 1 hops come
  // from last hops already known at h hops, taken in increasing address
  // order (and their destinations too) so the lowest last hop wins a tie.
  // The edges sorted by (last, dest) serve as each last hop's list, each
  // edge one integer (last above dest) so the searches and the order check
  // compare words, not pairs of addresses.
  auto edge_key = [](core::NodeId last, core::NodeId dest) { return uint64_t{last.value()} << 32 | dest.value(); };
  edges_.clear();
  edges_.reserve(input.topology.size());
  for (const auto& e : input.topology) edges_.push_back(edge_key(e.last, e.dest));
  // OLSR's topology set hands them over in this order already.
  if (!std::is_sorted(edges_.begin(), edges_.end())) std::sort(edges_.begin(), edges_.end());
  for (uint32_t h = 2; !frontier_.empty(); ++h) {
    reached_.clear();
    for (core::NodeId last : frontier_) {
      const core::Ipv4Address next_hop = table_.find(last)->route.next_hop;
      for (auto e = std::lower_bound(edges_.begin(), edges_.end(), edge_key(last, core::NodeId()));
           e != edges_.end() && *e >> 32 == last.value(); ++e) {
        const core::NodeId dest(static_cast<uint32_t>(*e));
        if (dest == input.self) continue;
        if (table_.try_add(Slot{Route{dest, next_hop, h + 1}, last, Origin::topology})) reached_.push_back(dest);
      }
    }
    std::sort(reached_.begin(), reached_.end());
    frontier_.swap(reached_);
  }

  for (const auto& [main, aliases] : input.aliases) {
    const Slot* slot = table_.find(main);
    if (slot == nullptr) continue;
    const Route via_main = slot->route;
    for (auto alias : aliases) {
      if (alias == input.self) continue;
      table_.try_add(Slot{Route{alias, via_main.next_hop, via_main.hops}, {}, Origin::alias});
    }
  }
  table_.sorted_by_destination(routes_);
  return routes_;
}

bool RouteCalculator::edge_change_may_alter(const RoutingInput::TopologyEdge& edge, bool added) const {
  // The pass skips edges to this node, and reads only the edges of the
  // nodes it expands.
  if (edge.dest == self_) return false;
  const Slot* last = table_.find(edge.last);
  if (last == nullptr || (last->origin != Origin::two_hop && last->origin != Origin::topology)) return false;
  const Slot* dest = table_.find(edge.dest);
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
