#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "core/node_id.h"

namespace mesh::routing::olsr {

// A symmetric one-hop neighbour as MPR selection sees it: its willingness and
// the symmetric neighbours it reports (from its HELLOs), which may include
// this node and other one-hop neighbours; selection filters those out.
struct MprCandidate {
  core::NodeId id;
  uint8_t willingness = 3;
  std::vector<core::NodeId> neighbours;
};

// RFC 3626 §8.3.1: every WILL_ALWAYS neighbour; then every neighbour that is
// the only way to some strict two-hop neighbour; then, while a two-hop
// neighbour is uncovered, the candidate with the highest willingness, then
// reachability (uncovered two-hop neighbours it covers), then degree (its
// neighbours outside this node's one-hop set), then the lowest address so
// every run agrees; finally the optional pruning pass that drops, in
// increasing willingness, any MPR below WILL_ALWAYS whose two-hop neighbours
// stay covered without it. WILL_NEVER neighbours are never chosen, and
// two-hop neighbours reachable only through them are not counted.
std::set<core::NodeId> select_mprs(core::NodeId self, const std::vector<MprCandidate>& neighbours);

}  // namespace mesh::routing::olsr
