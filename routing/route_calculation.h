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

}  // namespace mesh::routing::olsr
