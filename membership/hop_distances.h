#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/node_id.h"

namespace mesh::membership {

// Hop counts as routing knows them. Medley skews its probing by hop distance;
// it takes distances through this interface so routing (OLSR's table) and
// tests (any matrix) can both supply them.
class HopDistances {
 public:
  virtual ~HopDistances() = default;

  // Hops from this node to `to`; nullopt when no route is known.
  virtual std::optional<uint32_t> hops_to(core::NodeId to) const = 0;
  // Hops between two other nodes, when the source knows the whole topology
  // (OLSR's TC set does). Used to pick ping-req helpers near the target; the
  // default says "unknown", and Medley then falls back to helpers near itself.
  virtual std::optional<uint32_t> hops_between(core::NodeId from, core::NodeId to) const {
    (void)from;
    (void)to;
    return std::nullopt;
  }
  // Every node at most `hops` from this one (itself excluded), sorted, when
  // the source can list them without asking hops_to() of each node it knows
  // (OLSR's route table is one sorted scan); nullopt otherwise, and callers
  // then ask hops_to() of every candidate. Medley's passive feedback looks
  // for near members at every probe, and asking of each of 1000 members cost
  // more than the scan.
  virtual std::optional<std::vector<core::NodeId>> nodes_within(uint32_t hops) const {
    (void)hops;
    return std::nullopt;
  }
};

}  // namespace mesh::membership
