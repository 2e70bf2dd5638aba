#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/env.h"
#include "core/expected.h"
#include "core/node_id.h"
#include "kgroup/group_target.h"

namespace mesh::kgroup {

// How protocol code above the k-groups (device leaders handing a device to
// another group, routine leaders taking locks and sending commands) writes
// to and reads from a group it does not belong to. The agent's k-group
// client (agent/kgroup_service.h) implements it: routing to the target's
// leader, redirects, retries and exactly-once write ids; so a write's
// success means the target's leader committed it at a quorum.
//
// Payloads are a ClientStateMachine's update payloads and queries; an
// update must fit ReplicaOptions::max_update_bytes with its 8-byte write id.
class GroupClient {
 public:
  struct Written {
    core::NodeId leader;
  };
  using WriteCallback = std::function<void(const core::Expected<Written, std::string>& result)>;
  struct Answer {
    std::string answer;
    core::NodeId leader;
  };
  using ReadCallback = std::function<void(const core::Expected<Answer, std::string>& result)>;

  virtual ~GroupClient() = default;
  // Commits `payload` in `target`'s group; the callback runs once, with an
  // error if no leader acknowledged it within `timeout` (the write may
  // still be applied later).
  virtual void write_to(const GroupTarget& target, std::string payload, core::Duration timeout,
                        WriteCallback callback) = 0;
  // A linearizable read at `target`'s leader; never creates the group (no
  // group: an error naming that). The callback runs once.
  virtual void read_from(const GroupTarget& target, std::string query, core::Duration timeout,
                         ReadCallback callback) = 0;
};

}  // namespace mesh::kgroup
