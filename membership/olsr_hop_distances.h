#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/env.h"
#include "membership/hop_distances.h"
#include "routing/olsr_protocol.h"

namespace mesh::membership {

// Hop distances from OLSR's state, for Medley in the agent: hops_to() from
// the routing table; hops_between() by breadth-first search over the links
// OLSR knows (its own symmetric neighbours, two-hop neighbours and the TC
// topology set).
//
// Cost: Medley asks hops_between(c, target) for every helper candidate c of
// one ping-req target, so the search runs from the target (the link graph is
// undirected, so the distance is the same either way) and its result serves
// all candidates. The graph is rebuilt at most once per `refresh`, and only
// when OLSR's topology_version() moved since the last build; searches are
// kept for the few latest targets until then. A mesh whose topology holds
// still thus costs one search per new target, not one per candidate per
// refresh.
class OlsrHopDistances final : public HopDistances {
 public:
  OlsrHopDistances(core::Env& env, const routing::olsr::OlsrProtocol& olsr,
                   core::Duration refresh = std::chrono::seconds(1));

  std::optional<uint32_t> hops_to(core::NodeId to) const override;
  std::optional<uint32_t> hops_between(core::NodeId from, core::NodeId to) const override;
  std::optional<std::vector<core::NodeId>> nodes_within(uint32_t hops) const override;

 private:
  static constexpr uint32_t kUnreached = UINT32_MAX;
  // Ping-req targets come one at a time; a handful covers retries.
  static constexpr size_t kCachedTargets = 4;

  void rebuild_if_stale() const;
  void rebuild() const;
  std::optional<uint32_t> index_of(core::NodeId id) const;
  const std::vector<uint32_t>& distances_from(uint32_t source) const;

  core::Env& env_;
  const routing::olsr::OlsrProtocol& olsr_;
  core::Duration refresh_;
  mutable std::optional<core::TimePoint> built_at_;
  mutable uint64_t built_version_ = 0;
  // The link graph in compressed rows: nodes_ sorted, the neighbours of
  // nodes_[i] at adjacent_[first_[i]] .. adjacent_[first_[i + 1]].
  mutable std::vector<core::NodeId> nodes_;
  mutable std::vector<uint32_t> first_;
  mutable std::vector<uint32_t> adjacent_;
  // (source index, distance to every node index), most recent last.
  mutable std::vector<std::pair<uint32_t, std::vector<uint32_t>>> searches_;
};

}  // namespace mesh::membership
