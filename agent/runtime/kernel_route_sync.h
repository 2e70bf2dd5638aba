#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/runtime/kernel_routes.h"
#include "core/node_id.h"
#include "routing/route_calculation.h"

namespace mesh::agent {

// One mesh interface as the kernel knows it: its number and the subnet of
// its IPv4 address, which tells the interface a next hop is reached on.
struct MeshInterface {
  int ifindex = 0;
  core::Ipv4Address address;
  uint8_t prefix_length = 32;
};

// An OLSR route that gets no kernel route, and why.
struct SkippedRoute {
  routing::olsr::Route route;
  std::string reason;
};

struct KernelRouteMapping {
  std::vector<KernelRoute> routes;
  std::vector<SkippedRoute> skipped;
};

// The interface whose subnet holds `address` (the longest prefix wins); with
// a single interface, that one, since a mesh of /32 addresses (802.11s) puts
// no neighbour in the interface's subnet. Nothing when it is ambiguous.
std::optional<MeshInterface> interface_for(core::Ipv4Address address, const std::vector<MeshInterface>& interfaces);

// The kernel host routes for OLSR's routing table, one per destination,
// metric = hop count:
// - a neighbour (next hop = destination): on-link on the interface it is
//   heard on; skipped when that interface cannot be told;
// - any other destination: via its next hop, on the next hop's interface
//   when known, else interface 0 (the kernel picks the one that reaches it).
// Skipped too: this node's own addresses (`own`), a next hop that is one of
// them, and addresses no host route may name (0.0.0.0, 127/8, multicast,
// broadcast). Pure: the same input always gives the same output.
KernelRouteMapping map_kernel_routes(const std::vector<routing::olsr::Route>& table,
                                     const std::vector<MeshInterface>& interfaces,
                                     const std::vector<core::Ipv4Address>& own);

}  // namespace mesh::agent
