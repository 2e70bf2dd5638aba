#include "agent/runtime/kernel_route_sync.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/config.h"

namespace mesh::agent {
namespace {

using routing::olsr::Route;
using ::testing::HasSubstr;

core::Ipv4Address ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return core::Ipv4Address::from_octets(a, b, c, d); }

// n0 of a chain n0-n1-n2-n3 over /30 veth links, as scripts/testbed builds it:
// n0 is 10.231.0.1 on veth0 (ifindex 7), n1 is 10.231.0.2 and 10.231.0.5.
const std::vector<MeshInterface> kChainInterfaces = {{7, ip(10, 231, 0, 1), 30}};

TEST(KernelRouteSync, NeighbourIsOnLinkAndFartherNodesGoViaTheNextHop) {
  const std::vector<Route> table = {
      {ip(10, 231, 0, 2), ip(10, 231, 0, 2), 1},   // n1
      {ip(10, 231, 0, 5), ip(10, 231, 0, 2), 1},   // n1's second interface (MID)
      {ip(10, 231, 0, 6), ip(10, 231, 0, 2), 2},   // n2
      {ip(10, 231, 0, 10), ip(10, 231, 0, 2), 3},  // n3
  };
  const KernelRouteMapping mapping = map_kernel_routes(table, kChainInterfaces, {ip(10, 231, 0, 1)});
  EXPECT_TRUE(mapping.skipped.empty());
  const std::vector<KernelRoute> want = {
      {ip(10, 231, 0, 2), 32, {}, 7, 1},
      {ip(10, 231, 0, 5), 32, ip(10, 231, 0, 2), 7, 1},
      {ip(10, 231, 0, 6), 32, ip(10, 231, 0, 2), 7, 2},
      {ip(10, 231, 0, 10), 32, ip(10, 231, 0, 2), 7, 3},
  };
  EXPECT_EQ(mapping.routes, want);
}

TEST(KernelRouteSync, OwnAddressesGetNoRoute) {
  // A neighbour's TC or MID can name our other interface; the kernel has it as local.
  const std::vector<Route> table = {
      {ip(10, 231, 0, 2), ip(10, 231, 0, 2), 1},
      {ip(10, 9, 9, 9), ip(10, 231, 0, 2), 2},    // own MID alias
      {ip(10, 231, 0, 1), ip(10, 231, 0, 2), 2},  // own interface address
      {ip(10, 7, 0, 1), ip(10, 231, 0, 1), 2},    // through ourselves
  };
  const KernelRouteMapping mapping = map_kernel_routes(table, kChainInterfaces, {ip(10, 9, 9, 9)});
  ASSERT_EQ(mapping.routes.size(), 1u);
  EXPECT_EQ(mapping.routes[0].destination, ip(10, 231, 0, 2));
  ASSERT_EQ(mapping.skipped.size(), 3u);
  EXPECT_THAT(mapping.skipped[0].reason, HasSubstr("own address"));
  EXPECT_EQ(mapping.skipped[1].route, table[2]);
  EXPECT_THAT(mapping.skipped[2].reason, HasSubstr("next hop is this node's own address"));
}

TEST(KernelRouteSync, NextHopPicksTheInterfaceWhoseSubnetHoldsIt) {
  const std::vector<MeshInterface> interfaces = {{3, ip(10, 0, 0, 1), 24}, {4, ip(10, 1, 0, 1), 24}};
  const std::vector<Route> table = {
      {ip(10, 1, 0, 7), ip(10, 1, 0, 7), 1},      // neighbour on the second interface
      {ip(10, 5, 0, 1), ip(10, 1, 0, 7), 2},      // through it
      {ip(10, 0, 0, 9), ip(10, 0, 0, 9), 1},      // neighbour on the first
      {ip(172, 16, 0, 3), ip(172, 16, 0, 3), 1},  // neighbour in neither subnet: interface unknown
      {ip(10, 6, 0, 1), ip(172, 16, 0, 3), 2},    // through it: the kernel picks the interface
  };
  const KernelRouteMapping mapping = map_kernel_routes(table, interfaces, {});
  const std::vector<KernelRoute> want = {
      {ip(10, 1, 0, 7), 32, {}, 4, 1},
      {ip(10, 5, 0, 1), 32, ip(10, 1, 0, 7), 4, 2},
      {ip(10, 0, 0, 9), 32, {}, 3, 1},
      {ip(10, 6, 0, 1), 32, ip(172, 16, 0, 3), 0, 2},
  };
  EXPECT_EQ(mapping.routes, want);
  ASSERT_EQ(mapping.skipped.size(), 1u);
  EXPECT_EQ(mapping.skipped[0].route, table[3]);
  EXPECT_THAT(mapping.skipped[0].reason, HasSubstr("interface is unknown"));
}

TEST(KernelRouteSync, InterfaceLookup) {
  const std::vector<MeshInterface> nested = {{1, ip(10, 0, 0, 1), 8}, {2, ip(10, 1, 0, 1), 16}};
  EXPECT_EQ(interface_for(ip(10, 1, 2, 3), nested)->ifindex, 2);  // longest prefix
  EXPECT_EQ(interface_for(ip(10, 2, 0, 3), nested)->ifindex, 1);
  EXPECT_FALSE(interface_for(ip(11, 0, 0, 1), nested).has_value());
  // One interface with a /32 address (an 802.11s mesh): every neighbour is on it.
  const std::vector<MeshInterface> single = {{5, ip(10, 0, 0, 1), 32}};
  EXPECT_EQ(interface_for(ip(10, 0, 0, 2), single)->ifindex, 5);
  EXPECT_FALSE(interface_for(ip(10, 0, 0, 2), {}).has_value());
}

TEST(KernelRouteSync, AddressesNoHostRouteMayNameAreSkipped) {
  const core::Ipv4Address neighbour = ip(10, 231, 0, 2);
  const std::vector<Route> table = {
      {ip(0, 0, 0, 0), neighbour, 2},          // unspecified
      {ip(127, 0, 0, 5), neighbour, 2},        // loopback
      {ip(224, 0, 0, 9), neighbour, 2},        // multicast
      {ip(255, 255, 255, 255), neighbour, 2},  // limited broadcast
      {ip(10, 9, 0, 1), ip(127, 0, 0, 1), 2},  // a loopback next hop
  };
  const KernelRouteMapping mapping = map_kernel_routes(table, kChainInterfaces, {});
  EXPECT_TRUE(mapping.routes.empty());
  ASSERT_EQ(mapping.skipped.size(), table.size());
  EXPECT_THAT(mapping.skipped[4].reason, HasSubstr("next hop"));
}

TEST(KernelRouteSync, FirstRouteToADestinationWins) {
  const std::vector<Route> table = {
      {ip(10, 9, 0, 1), ip(10, 231, 0, 2), 2},
      {ip(10, 9, 0, 1), ip(10, 231, 0, 2), 3},
  };
  const KernelRouteMapping mapping = map_kernel_routes(table, kChainInterfaces, {});
  ASSERT_EQ(mapping.routes.size(), 1u);
  EXPECT_EQ(mapping.routes[0].metric, 2u);
  ASSERT_EQ(mapping.skipped.size(), 1u);
}

TEST(KernelRouteSync, NewNextHopBecomesOneReplace) {
  const std::vector<Route> before = {
      {ip(10, 231, 0, 2), ip(10, 231, 0, 2), 1},
      {ip(10, 9, 0, 1), ip(10, 231, 0, 2), 2},
  };
  std::vector<Route> after = before;
  after.push_back({ip(10, 231, 0, 3), ip(10, 231, 0, 3), 1});
  after[1].next_hop = ip(10, 231, 0, 3);
  const auto old_routes = map_kernel_routes(before, kChainInterfaces, {}).routes;
  const auto new_routes = map_kernel_routes(after, kChainInterfaces, {}).routes;
  const SyncPlan plan = plan_sync(old_routes, new_routes);
  EXPECT_TRUE(plan.errors.empty());
  EXPECT_EQ(plan.unchanged, 1u);
  ASSERT_EQ(plan.changes.size(), 2u);
  EXPECT_EQ(plan.changes[0].kind, RouteChange::Kind::add);  // the new neighbour, on-link, first
  EXPECT_TRUE(plan.changes[0].route.on_link());
  EXPECT_EQ(plan.changes[1].kind, RouteChange::Kind::replace);
  EXPECT_EQ(plan.changes[1].route.gateway, ip(10, 231, 0, 3));
}

TEST(KernelRouteSync, ConfigDefaultIsTheModulesDefault) {
  EXPECT_EQ(KernelRoutesConfig{}.protocol, KernelRoutes::kDefaultProtocol);
  EXPECT_FALSE(KernelRoutesConfig{}.install);
}

// Random tables over a few subnets: whatever OLSR hands over, the mapping is
// something the kernel accepts in one sync from an empty table.
TEST(KernelRouteSync, RandomTablesMapToValidRoutes) {
  constexpr int kSeeds = 300;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    // Addresses drawn from a small space so collisions (own addresses, duplicates) happen.
    auto address = [&]() -> core::Ipv4Address {
      switch (pick(8)) {
        case 0:
          return ip(127, 0, 0, static_cast<uint8_t>(pick(4)));
        case 1:
          return ip(10, 0, 0, static_cast<uint8_t>(pick(4)));
        default:
          return ip(10, static_cast<uint8_t>(pick(3)), 0, static_cast<uint8_t>(pick(12)));
      }
    };
    std::vector<MeshInterface> interfaces;
    for (int i = 0, n = pick(4); i < n; ++i) {
      interfaces.push_back({i + 1, ip(10, static_cast<uint8_t>(i), 0, 1), static_cast<uint8_t>(pick(2) ? 24 : 32)});
    }
    const std::vector<core::Ipv4Address> own = {address()};
    std::vector<Route> table;
    for (int i = 0, n = pick(30); i < n; ++i) {
      const core::Ipv4Address destination = address();
      const bool neighbour = pick(3) == 0;
      table.push_back({destination, neighbour ? destination : address(), static_cast<uint32_t>(1 + pick(6))});
    }

    const KernelRouteMapping mapping = map_kernel_routes(table, interfaces, own);
    ASSERT_EQ(mapping.routes.size() + mapping.skipped.size(), table.size()) << "a route was lost or doubled";
    std::set<core::Ipv4Address> destinations;
    for (const KernelRoute& route : mapping.routes) {
      EXPECT_EQ(validate(route), std::nullopt) << route.to_string();
      EXPECT_TRUE(destinations.insert(route.destination).second) << "two routes to " << route.to_string();
      EXPECT_EQ(std::count(own.begin(), own.end(), route.destination), 0) << route.to_string();
      EXPECT_EQ(std::count(own.begin(), own.end(), route.gateway), 0) << route.to_string();
      // The table route it came from: the first one to its destination
      // that was not skipped (skipped copies are consumed in table order).
      std::vector<Route> skipped_left;
      for (const SkippedRoute& skipped : mapping.skipped) skipped_left.push_back(skipped.route);
      const auto source = std::find_if(table.begin(), table.end(), [&](const Route& r) {
        if (r.destination != route.destination) return false;
        const auto copy = std::find(skipped_left.begin(), skipped_left.end(), r);
        if (copy == skipped_left.end()) return true;
        skipped_left.erase(copy);
        return false;
      });
      ASSERT_NE(source, table.end()) << route.to_string();
      EXPECT_EQ(route.metric, source->hops);
      EXPECT_EQ(route.on_link(), source->next_hop == source->destination) << route.to_string();
      if (!route.on_link()) {
        EXPECT_EQ(route.gateway, source->next_hop);
      }
      const auto iface = interface_for(source->next_hop, interfaces);
      EXPECT_EQ(route.ifindex, iface ? iface->ifindex : 0) << route.to_string();
    }
    for (const SkippedRoute& skipped : mapping.skipped) EXPECT_FALSE(skipped.reason.empty());

    const SyncPlan plan = plan_sync({}, mapping.routes);
    EXPECT_TRUE(plan.errors.empty());
    ASSERT_EQ(plan.changes.size(), mapping.routes.size());
    EXPECT_TRUE(std::is_partitioned(plan.changes.begin(), plan.changes.end(),
                                    [](const RouteChange& change) { return change.route.on_link(); }));
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace mesh::agent
