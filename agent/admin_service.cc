#include "agent/admin_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "core/log.h"
#include "core/version.h"

namespace mesh::agent {
namespace {

// spdlog's level names, as core::set_log_level accepts them.
constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
constexpr std::string_view kCommands = "status, metrics, log_level, ping, neighbors, routes, topology";

proto::AdminResponse error_response(std::string text) {
  proto::AdminResponse response;
  response.set_error(std::move(text));
  return response;
}

int prefix_length(core::Ipv4Address netmask) {
  int length = 0;
  for (uint32_t bits = netmask.value(); bits & 0x80000000u; bits <<= 1) ++length;
  return length;
}

void fill_labels(const core::Labels& labels, google::protobuf::Map<std::string, std::string>& out) {
  for (const auto& [key, value] : labels) out[key] = value;
}

}  // namespace

AdminService::AdminService(Node& node) : node_(node) {}

void AdminService::handle(const proto::AdminRequest& request, Reply reply) {
  switch (request.command_case()) {
    case proto::AdminRequest::kStatus:
      reply(status());
      return;
    case proto::AdminRequest::kMetrics:
      reply(metrics());
      return;
    case proto::AdminRequest::kLogLevel:
      reply(log_level(request.log_level()));
      return;
    case proto::AdminRequest::kPing:
      ping(request.ping(), std::move(reply));
      return;
    case proto::AdminRequest::kNeighbors:
      reply(neighbors());
      return;
    case proto::AdminRequest::kRoutes:
      reply(routes());
      return;
    case proto::AdminRequest::kTopology:
      reply(topology());
      return;
    case proto::AdminRequest::COMMAND_NOT_SET:
      break;
  }
  // An empty command is what an unknown oneof member from a newer meshctl
  // parses as.
  reply(error_response(fmt::format("unknown command; this agent speaks {} (meshagent {}); is meshctl from a "
                                   "different version?",
                                   kCommands, kVersion)));
}

proto::AdminResponse AdminService::status() const {
  proto::AdminResponse response;
  proto::StatusReply& status = *response.mutable_status();
  status.set_node_id(node_.id().to_string());
  status.set_name(node_.name());
  status.set_version(kVersion);
  status.set_uptime_s(core::to_seconds(node_.uptime()));
  for (const Node::LayerLine& line : node_.status()) {
    proto::LayerStatus& layer = *status.add_layers();
    layer.set_layer(line.layer);
    layer.set_summary(line.summary);
  }
  const core::TimePoint now = node_.env().now();
  for (const auto& neighbour : node_.olsr().neighbours()) {
    if (neighbour.status != routing::olsr::LinkStatus::symmetric) continue;
    proto::NeighbourStatus& entry = *status.add_neighbours();
    entry.set_id(neighbour.main.to_string());
    entry.set_last_heard_s(core::to_seconds(now - neighbour.last_heard));
  }
  return response;
}

proto::AdminResponse AdminService::neighbors() const {
  proto::AdminResponse response;
  proto::NeighborsReply& reply = *response.mutable_neighbors();
  const core::TimePoint now = node_.env().now();
  for (const auto& neighbour : node_.olsr().neighbours()) {
    proto::OlsrNeighbor& entry = *reply.add_neighbors();
    entry.set_id(neighbour.main.to_string());
    entry.set_link_address(neighbour.link_address.to_string());
    entry.set_status(std::string(routing::olsr::to_string(neighbour.status)));
    entry.set_willingness(neighbour.willingness);
    entry.set_mpr(neighbour.is_mpr);
    entry.set_mpr_selector(neighbour.is_mpr_selector);
    entry.set_last_heard_s(core::to_seconds(now - neighbour.last_heard));
  }
  for (const auto& [via, two_hop] : node_.olsr().two_hop()) {
    proto::TwoHopNeighbor& entry = *reply.add_two_hop();
    entry.set_via(via.to_string());
    entry.set_id(two_hop.to_string());
  }
  return response;
}

proto::AdminResponse AdminService::routes() const {
  proto::AdminResponse response;
  proto::RoutesReply& reply = *response.mutable_routes();
  for (const auto& route : node_.olsr().routes()) {
    proto::RouteEntry& entry = *reply.add_routes();
    entry.set_destination(route.destination.to_string());
    entry.set_next_hop(route.next_hop.to_string());
    entry.set_hops(route.hops);
  }
  return response;
}

proto::AdminResponse AdminService::topology() const {
  proto::AdminResponse response;
  proto::TopologyReply& reply = *response.mutable_topology();
  for (const auto& tuple : node_.olsr().topology()) {
    proto::TopologyEntry& entry = *reply.add_entries();
    entry.set_destination(tuple.dest.to_string());
    entry.set_last_hop(tuple.last.to_string());
    entry.set_ansn(tuple.ansn);
    entry.set_expires_in_s(tuple.seconds_left);
  }
  for (const auto& hna : node_.olsr().hna()) {
    proto::HnaAnnouncement& entry = *reply.add_hna();
    entry.set_gateway(hna.gateway.to_string());
    entry.set_network(fmt::format("{}/{}", hna.network.network.to_string(), prefix_length(hna.network.netmask)));
    entry.set_expires_in_s(hna.seconds_left);
  }
  return response;
}

proto::AdminResponse AdminService::metrics() const {
  proto::AdminResponse response;
  proto::MetricsReply& metrics = *response.mutable_metrics();
  const core::Metrics& source = node_.metrics();
  for (const auto& row : source.counters()) {
    proto::CounterSample& sample = *metrics.add_counters();
    sample.set_series(row.series);
    sample.set_name(row.name);
    fill_labels(row.labels, *sample.mutable_labels());
    sample.set_value(row.value);
  }
  for (const auto& row : source.histograms()) {
    proto::HistogramSample& sample = *metrics.add_histograms();
    sample.set_series(row.series);
    sample.set_name(row.name);
    fill_labels(row.labels, *sample.mutable_labels());
    sample.set_count(row.histogram->count());
    sample.set_mean(row.histogram->mean());
    sample.set_p50(row.histogram->quantile(0.5));
    sample.set_p99(row.histogram->quantile(0.99));
    sample.set_max(row.histogram->max());
  }
  return response;
}

proto::AdminResponse AdminService::log_level(const proto::LogLevelRequest& request) const {
  const std::string& level = request.level();
  const std::string& layer = request.layer();
  if (std::find(kLevels.begin(), kLevels.end(), level) == kLevels.end()) {
    return error_response(
        fmt::format("unknown log level '{}'; valid levels: {}", level, fmt::join(kLevels, ", ")));
  }
  const std::vector<std::string> layers = core::log_layers();
  if (!layer.empty() && std::find(layers.begin(), layers.end(), layer) == layers.end()) {
    return error_response(fmt::format("unknown layer '{}'; valid layers: {} (or none for every layer)", layer,
                                      fmt::join(layers, ", ")));
  }
  if (!core::set_log_level(level, layer)) {
    return error_response(fmt::format("could not set log level '{}' for layer '{}'", level, layer));
  }
  core::log("agent").info("log level changed level={} layer={}", level, layer.empty() ? "*" : layer);
  proto::AdminResponse response;
  proto::LogLevelReply& reply = *response.mutable_log_level();
  reply.set_level(level);
  if (layer.empty()) {
    for (const std::string& name : core::log_layers()) reply.add_layers(name);
  } else {
    reply.add_layers(layer);
  }
  return response;
}

void AdminService::ping(const proto::PingRequest& request, Reply reply) {
  const std::optional<core::NodeId> destination = core::NodeId::parse(request.node());
  if (!destination) {
    reply(error_response(fmt::format("not an IPv4 address: '{}' (a node is named by its address, e.g. 10.0.0.2)",
                                     request.node())));
    return;
  }
  const core::Duration timeout = std::chrono::milliseconds(request.timeout_ms());
  const std::string node_text = destination->to_string();
  node_.ping(*destination, timeout, [node_text, reply = std::move(reply)](const EchoService::Result& result) {
    if (result.status != core::RequestStatus::ok) {
      reply(error_response(result.error));
      return;
    }
    proto::AdminResponse response;
    proto::PingReply& ping = *response.mutable_ping();
    ping.set_node(node_text);
    ping.set_rtt_ms(result.rtt_ms);
    ping.set_hops(result.hops);
    ping.set_attempts(result.attempts);
    reply(std::move(response));
  });
}

}  // namespace mesh::agent
