#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/node_id.h"

namespace mesh::routing::olsr {

// What the route calculation reads from OLSR's information repositories.
struct RoutingInput {
  core::NodeId self;
  struct Neighbour {
    core::NodeId main;                // neighbour's main address
    core::Ipv4Address link_address;   // the interface address we hear it on: the next hop
  };
  std::vector<Neighbour> symmetric_neighbours;
  struct TwoHop {
    core::NodeId via;        // symmetric neighbour (main address)
    core::NodeId two_hop;    // its symmetric neighbour (main address)
  };
  std::vector<TwoHop> two_hop;   // only through neighbours whose willingness is not WILL_NEVER
  struct TopologyEdge {
    core::NodeId last;  // T_last: the node that advertised
    core::NodeId dest;  // T_dest: its advertised neighbour
  };
  std::vector<TopologyEdge> topology;
  // MID: main address -> its other interface addresses.
  std::map<core::NodeId, std::vector<core::Ipv4Address>> aliases;
};

struct Route {
  core::Ipv4Address destination;
  core::Ipv4Address next_hop;  // an interface address of a symmetric neighbour
  uint32_t hops = 0;
  friend bool operator==(const Route&, const Route&) = default;
};

// RFC 3626 §10: one-hop neighbours, then two-hop neighbours, then the
// topology set breadth first (so hop counts are minimal), then MID aliases
// with their main address's route. Ties go to the lowest address at every
// step so every node computes the same table from the same input. Sorted by
// destination.
std::vector<Route> compute_routes(const RoutingInput& input);

// compute_routes() that remembers how it found each route, so that a change
// of the topology set can be tested against the last table: in a mesh of N
// nodes every node hears of topology changes about N times as often as in a
// small one, and most of them (a link far away, or one the breadth-first
// pass never takes) change no route.
class RouteCalculator {
 public:
  // The table for `input`, from scratch (as compute_routes()).
  std::vector<Route> compute(const RoutingInput& input);

  // Whether adding (or removing) the topology edge `edge` to the input of
  // the last compute(), all else equal, may give another table. False only
  // when it cannot: the edge starts at a node the breadth-first pass never
  // expands (unreached, a neighbour, an alias), or the pass reaches its
  // destination as soon (with a lower last hop on a tie) without it, or a
  // removed edge is not the one the pass took. A batch of changes each
  // answered false leaves every level of the pass, and so the table, as it
  // was: the caller may keep the last table and skip compute().
  bool edge_change_may_alter(const RoutingInput::TopologyEdge& edge, bool added) const;

 private:
  // How the calculation found a route: the breadth-first pass expands the
  // two-hop and topology routes only.
  enum class Origin : uint8_t { neighbour, two_hop, topology, alias };
  struct Slot {
    Route route;
    core::NodeId last;  // topology routes: the T_last the pass reached it from
    Origin origin = Origin::neighbour;
  };

  // The table under construction, keyed by destination, in one array with
  // open addressing: a calculation visits every node of the mesh, up to ten
  // times a second on every node, and a hashed map allocated (and freed) a
  // node per destination each time. Sized for an expected number of routes
  // and grown when that was short: sized for every topology edge, its slots
  // (each cleared, then scanned) outnumbered the routes several times over.
  class Table {
   public:
    explicit Table(size_t expected);
    const Slot* find(core::Ipv4Address destination) const;
    // Adds the slot unless its destination has one already; whether it did.
    bool try_add(const Slot& slot);
    // Every slot held, sorted by destination, into `out`.
    void sorted_by_destination(std::vector<Slot>& out) const;

   private:
    // Every route is at least one hop long.
    static bool is_empty(const Slot& slot) { return slot.route.hops == 0; }
    size_t slot_of(core::Ipv4Address destination) const;
    void resize(size_t slots);

    std::vector<Slot> slots_;
    int shift_ = 0;
    size_t size_ = 0;
  };

  // The last calculation's slot of `destination`, if any.
  const Slot* last_slot(core::Ipv4Address destination) const;

  core::NodeId self_;
  // How the last calculation found each route, sorted by destination: what
  // edge_change_may_alter() reads. Kept instead of the hashed table, whose
  // mostly empty slots would stay allocated on every node between
  // calculations (100 KB per node in a mesh of 1000).
  std::vector<Slot> last_table_;
};

}  // namespace mesh::routing::olsr
