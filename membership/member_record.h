#pragma once

#include "core/node_id.h"
#include "membership/member_view.h"

namespace mesh::membership {

// One member's state as it travels between nodes (a piggy-backed update or a
// sync entry). Alive records carry what the member says about itself
// (`has_info`); suspect/failed/left updates name only the id, incarnation and
// accuser, and are ignored by a node that does not know the member yet.
struct MemberRecord {
  Member member;
  bool has_info = false;
  core::NodeId accuser;  // suspect/failed: whose probe failed

  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

}  // namespace mesh::membership
