// meshctl verbs about OLSR routing: neighbors, routes, topology.
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    neighbors
        OLSR's one-hop neighbours: main and link address, link status
        (symmetric, asymmetric, lost), willingness, whether we chose it as
        an MPR and whether it chose us (MPR selector), and the time since
        its latest HELLO; then the two-hop neighbours and who reaches them.

    routes
        The routing table: destination, next hop and hop count, sorted by
        destination. Agent messages and pings follow these routes.

    topology
        OLSR's topology set (who advertised a link to whom in its TC, with
        the ANSN and the time left) and the HNA networks announced.
)";

int run_neighbors(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::NeighborsReply>(
      connection, line, "neighbors", [](mesh::proto::AdminRequest& r) { r.mutable_neighbors(); },
      &mesh::proto::AdminResponse::has_neighbors, &mesh::proto::AdminResponse::neighbors);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->neighbors().empty()) {
    std::cout << "no neighbours heard\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NEIGHBOR", "LINK", "STATUS", "WILLINGNESS", "MPR", "MPR_SELECTOR", "HEARD"}};
  for (const auto& n : reply->neighbors()) {
    rows.push_back({n.id(), n.link_address(), n.status(), std::to_string(n.willingness()), n.mpr() ? "yes" : "no",
                    n.mpr_selector() ? "yes" : "no", fmt::format("{:.1f} s ago", n.last_heard_s())});
  }
  print_table(rows, {false, false, false, true, false, false, false});
  if (!reply->two_hop().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> two_hop = {{"TWO_HOP", "VIA"}};
    for (const auto& t : reply->two_hop()) two_hop.push_back({t.id(), t.via()});
    print_table(two_hop, {false, false});
  }
  return kExitOk;
}

int run_routes(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::RoutesReply>(
      connection, line, "routes", [](mesh::proto::AdminRequest& r) { r.mutable_routes(); },
      &mesh::proto::AdminResponse::has_routes, &mesh::proto::AdminResponse::routes);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->routes().empty()) {
    std::cout << "no routes\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"DESTINATION", "NEXT_HOP", "HOPS"}};
  for (const auto& r : reply->routes()) rows.push_back({r.destination(), r.next_hop(), std::to_string(r.hops())});
  print_table(rows, {false, false, true});
  return kExitOk;
}

int run_topology(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::TopologyReply>(
      connection, line, "topology", [](mesh::proto::AdminRequest& r) { r.mutable_topology(); },
      &mesh::proto::AdminResponse::has_topology, &mesh::proto::AdminResponse::topology);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->entries().empty()) {
    std::cout << "no topology entries\n";
  } else {
    std::vector<std::vector<std::string>> rows = {{"LAST_HOP", "DESTINATION", "ANSN", "EXPIRES"}};
    for (const auto& e : reply->entries()) {
      rows.push_back(
          {e.last_hop(), e.destination(), std::to_string(e.ansn()), fmt::format("in {:.1f} s", e.expires_in_s())});
    }
    print_table(rows, {false, false, true, false});
  }
  if (!reply->hna().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows = {{"GATEWAY", "NETWORK", "EXPIRES"}};
    for (const auto& h : reply->hna()) {
      rows.push_back({h.gateway(), h.network(), fmt::format("in {:.1f} s", h.expires_in_s())});
    }
    print_table(rows, {false, false, false});
  }
  return kExitOk;
}

constexpr Verb kVerbs[] = {
    {"neighbors", run_neighbors, "neighbours"},
    {"routes", run_routes},
    {"topology", run_topology},
};

}  // namespace

const VerbFamily& routing_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
