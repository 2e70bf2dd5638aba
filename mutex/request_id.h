#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "core/node_id.h"

namespace mesh::mutex {

// One request of one node for one resource. Requests are totally ordered by
// (seq, node, nonce), lowest first: the Ricart-Agrawala priority, with the
// node id breaking sequence-number ties and the per-instance nonce telling a
// restarted node's requests from those of its previous life.
struct RequestId {
  uint64_t seq = 0;
  core::NodeId node;
  uint32_t nonce = 0;

  friend constexpr auto operator<=>(const RequestId&, const RequestId&) = default;

  std::string to_string() const { return std::to_string(seq) + "@" + node.to_string() + "#" + std::to_string(nonce); }
};

}  // namespace mesh::mutex
