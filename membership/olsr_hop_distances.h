#pragma once

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/env.h"
#include "membership/hop_distances.h"
#include "routing/olsr_protocol.h"

namespace mesh::membership {

// Hop distances from OLSR's state, for Medley in the agent: hops_to() from
// the routing table; hops_between() by breadth-first search over the links
// OLSR knows (its own symmetric neighbours, two-hop neighbours and the TC
// topology set). The link graph is rebuilt at most once per `refresh`, so
// picking ping-req helpers stays cheap.
class OlsrHopDistances final : public HopDistances {
 public:
  OlsrHopDistances(core::Env& env, const routing::olsr::OlsrProtocol& olsr,
                   core::Duration refresh = std::chrono::seconds(1));

  std::optional<uint32_t> hops_to(core::NodeId to) const override;
  std::optional<uint32_t> hops_between(core::NodeId from, core::NodeId to) const override;

 private:
  void rebuild_if_stale() const;

  core::Env& env_;
  const routing::olsr::OlsrProtocol& olsr_;
  core::Duration refresh_;
  mutable std::optional<core::TimePoint> built_at_;
  mutable std::map<core::NodeId, std::set<core::NodeId>> adjacent_;
  // Distances from each source asked about since the last rebuild.
  mutable std::map<core::NodeId, std::map<core::NodeId, uint32_t>> from_cache_;
};

}  // namespace mesh::membership
