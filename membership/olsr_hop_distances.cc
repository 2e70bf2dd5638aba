#include "membership/olsr_hop_distances.h"

#include <algorithm>

namespace mesh::membership {

OlsrHopDistances::OlsrHopDistances(core::Env& env, const routing::olsr::OlsrProtocol& olsr, core::Duration refresh)
    : env_(env), olsr_(olsr), refresh_(refresh) {}

std::optional<uint32_t> OlsrHopDistances::hops_to(core::NodeId to) const {
  if (to == olsr_.main_address()) return 0;
  auto route = olsr_.route_to(to);
  if (!route) return std::nullopt;
  return route->hops;
}

std::optional<std::vector<core::NodeId>> OlsrHopDistances::nodes_within(uint32_t hops) const {
  std::vector<core::NodeId> near;
  for (const routing::olsr::Route& route : olsr_.routes()) {
    if (route.hops <= hops && route.destination != olsr_.main_address()) near.push_back(route.destination);
  }
  return near;
}

void OlsrHopDistances::rebuild_if_stale() const {
  const core::TimePoint now = env_.now();
  if (built_at_ && now - *built_at_ < refresh_) return;
  built_at_ = now;
  if (!nodes_.empty() && built_version_ == olsr_.topology_version()) return;
  built_version_ = olsr_.topology_version();
  rebuild();
}

void OlsrHopDistances::rebuild() const {
  searches_.clear();
  std::vector<std::pair<core::NodeId, core::NodeId>> edges;
  auto link = [&](core::NodeId a, core::NodeId b) {
    if (a == b) return;
    edges.emplace_back(a, b);
    edges.emplace_back(b, a);
  };
  const core::NodeId self = olsr_.main_address();
  for (const auto& n : olsr_.neighbours()) {
    if (n.status == routing::olsr::LinkStatus::symmetric) link(self, n.main);
  }
  for (const auto& [via, two_hop] : olsr_.two_hop()) link(via, two_hop);
  for (const auto& t : olsr_.topology()) link(t.last, t.dest);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());

  nodes_.clear();
  for (const auto& [a, b] : edges) {
    if (nodes_.empty() || nodes_.back() != a) nodes_.push_back(a);
  }
  first_.assign(nodes_.size() + 1, 0);
  adjacent_.clear();
  adjacent_.reserve(edges.size());
  size_t row = 0;
  for (const auto& [a, b] : edges) {
    while (nodes_[row] != a) first_[++row] = static_cast<uint32_t>(adjacent_.size());
    // Every edge was added both ways, so b has a row of its own.
    adjacent_.push_back(*index_of(b));
  }
  while (row < nodes_.size()) first_[++row] = static_cast<uint32_t>(adjacent_.size());
}

std::optional<uint32_t> OlsrHopDistances::index_of(core::NodeId id) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), id);
  if (it == nodes_.end() || *it != id) return std::nullopt;
  return static_cast<uint32_t>(it - nodes_.begin());
}

const std::vector<uint32_t>& OlsrHopDistances::distances_from(uint32_t source) const {
  for (const auto& [cached, dist] : searches_) {
    if (cached == source) return dist;
  }
  if (searches_.size() >= kCachedTargets) searches_.erase(searches_.begin());
  std::vector<uint32_t> dist(nodes_.size(), kUnreached);
  // The queue: nodes in the order they are reached, which is breadth-first.
  std::vector<uint32_t> order{source};
  order.reserve(nodes_.size());
  dist[source] = 0;
  for (size_t next = 0; next < order.size(); ++next) {
    const uint32_t u = order[next];
    for (uint32_t e = first_[u]; e < first_[u + 1]; ++e) {
      const uint32_t v = adjacent_[e];
      if (dist[v] != kUnreached) continue;
      dist[v] = dist[u] + 1;
      order.push_back(v);
    }
  }
  searches_.emplace_back(source, std::move(dist));
  return searches_.back().second;
}

std::optional<uint32_t> OlsrHopDistances::hops_between(core::NodeId from, core::NodeId to) const {
  if (from == to) return 0;
  rebuild_if_stale();
  auto target = index_of(to);
  auto source = index_of(from);
  if (!target || !source) return std::nullopt;
  const uint32_t hops = distances_from(*target)[*source];
  if (hops == kUnreached) return std::nullopt;
  return hops;
}

}  // namespace mesh::membership
