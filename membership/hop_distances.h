#pragma once

#include <cstdint>
#include <optional>

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
};

}  // namespace mesh::membership
