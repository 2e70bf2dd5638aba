#include "agent/runtime/kernel_route_sync.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "agent/config.h"

namespace mesh::agent {
namespace {

// The config's default and the module's must not drift apart.
static_assert(kDefaultKernelRouteProtocol == KernelRoutes::kDefaultProtocol);

uint32_t mask_of(uint8_t prefix_length) { return prefix_length == 0 ? 0 : ~uint32_t{0} << (32 - prefix_length); }

bool in_subnet(core::Ipv4Address address, const MeshInterface& iface) {
  const uint32_t mask = mask_of(std::min<uint8_t>(iface.prefix_length, 32));
  return (address.value() & mask) == (iface.address.value() & mask);
}

// Why no host route may name `address`, or nothing when one may.
std::optional<std::string> unroutable(core::Ipv4Address address) {
  const uint32_t value = address.value();
  if (value == 0) return std::string("0.0.0.0 is not a host");
  if ((value >> 24) == 127) return std::string("127.0.0.0/8 is this host's loopback");
  if ((value >> 28) == 0xe) return std::string("multicast is not a host");
  if (value == 0xffffffffu) return std::string("the limited broadcast is not a host");
  return std::nullopt;
}

}  // namespace

std::optional<MeshInterface> interface_for(core::Ipv4Address address, const std::vector<MeshInterface>& interfaces) {
  const MeshInterface* best = nullptr;
  for (const MeshInterface& iface : interfaces) {
    if (in_subnet(address, iface) && (best == nullptr || iface.prefix_length > best->prefix_length)) best = &iface;
  }
  if (best != nullptr) return *best;
  if (interfaces.size() == 1) return interfaces.front();
  return std::nullopt;
}

KernelRouteMapping map_kernel_routes(const std::vector<routing::olsr::Route>& table,
                                     const std::vector<MeshInterface>& interfaces,
                                     const std::vector<core::Ipv4Address>& own) {
  KernelRouteMapping mapping;
  const auto is_own = [&](core::Ipv4Address address) {
    return std::find(own.begin(), own.end(), address) != own.end() ||
           std::any_of(interfaces.begin(), interfaces.end(),
                       [&](const MeshInterface& iface) { return iface.address == address; });
  };
  const auto skip = [&](const routing::olsr::Route& route, std::string reason) {
    mapping.skipped.push_back({route, std::move(reason)});
  };
  std::set<core::Ipv4Address> mapped;
  for (const routing::olsr::Route& route : table) {
    if (is_own(route.destination)) {
      skip(route, "the destination is this node's own address");
      continue;
    }
    if (auto why = unroutable(route.destination)) {
      skip(route, "destination: " + *why);
      continue;
    }
    if (is_own(route.next_hop)) {
      skip(route, "the next hop is this node's own address");
      continue;
    }
    if (auto why = unroutable(route.next_hop)) {
      skip(route, "next hop: " + *why);
      continue;
    }
    if (mapped.count(route.destination) != 0) {
      skip(route, "another route of the table has the same destination; the first one is used");
      continue;
    }
    const std::optional<MeshInterface> iface = interface_for(route.next_hop, interfaces);
    KernelRoute kernel;
    kernel.destination = route.destination;
    kernel.prefix_length = 32;
    kernel.metric = route.hops;
    if (route.next_hop == route.destination) {
      if (!iface) {
        skip(route, fmt::format("no mesh interface's subnet holds neighbour {}, so its interface is unknown",
                                route.next_hop.to_string()));
        continue;
      }
      kernel.ifindex = iface->ifindex;
    } else {
      kernel.gateway = route.next_hop;
      kernel.ifindex = iface ? iface->ifindex : 0;
    }
    mapped.insert(route.destination);
    mapping.routes.push_back(kernel);
  }
  return mapping;
}

}  // namespace mesh::agent
