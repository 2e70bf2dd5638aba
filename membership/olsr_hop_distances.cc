#include "membership/olsr_hop_distances.h"

#include <deque>

namespace mesh::membership {

OlsrHopDistances::OlsrHopDistances(core::Env& env, const routing::olsr::OlsrProtocol& olsr, core::Duration refresh)
    : env_(env), olsr_(olsr), refresh_(refresh) {}

std::optional<uint32_t> OlsrHopDistances::hops_to(core::NodeId to) const {
  if (to == olsr_.main_address()) return 0;
  auto route = olsr_.route_to(to);
  if (!route) return std::nullopt;
  return route->hops;
}

void OlsrHopDistances::rebuild_if_stale() const {
  const core::TimePoint now = env_.now();
  if (built_at_ && now - *built_at_ < refresh_) return;
  built_at_ = now;
  adjacent_.clear();
  from_cache_.clear();
  auto link = [this](core::NodeId a, core::NodeId b) {
    if (a == b) return;
    adjacent_[a].insert(b);
    adjacent_[b].insert(a);
  };
  const core::NodeId self = olsr_.main_address();
  for (const auto& n : olsr_.neighbours()) {
    if (n.status == routing::olsr::LinkStatus::symmetric) link(self, n.main);
  }
  for (const auto& [via, two_hop] : olsr_.two_hop()) link(via, two_hop);
  for (const auto& t : olsr_.topology()) link(t.last, t.dest);
}

std::optional<uint32_t> OlsrHopDistances::hops_between(core::NodeId from, core::NodeId to) const {
  if (from == to) return 0;
  rebuild_if_stale();
  auto cached = from_cache_.find(from);
  if (cached == from_cache_.end()) {
    std::map<core::NodeId, uint32_t> dist{{from, 0}};
    std::deque<core::NodeId> queue{from};
    while (!queue.empty()) {
      const core::NodeId u = queue.front();
      queue.pop_front();
      auto it = adjacent_.find(u);
      if (it == adjacent_.end()) continue;
      for (core::NodeId v : it->second) {
        if (dist.emplace(v, dist[u] + 1).second) queue.push_back(v);
      }
    }
    cached = from_cache_.emplace(from, std::move(dist)).first;
  }
  auto hit = cached->second.find(to);
  if (hit == cached->second.end()) return std::nullopt;
  return hit->second;
}

}  // namespace mesh::membership
