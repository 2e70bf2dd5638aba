#include "kgroup/leader_read.h"

#include <utility>

#include "kgroup/group_replica.h"

namespace mesh::kgroup {
namespace {

ClientRoute retry(std::string reason) { return {ClientVerdict::retry, {}, std::move(reason)}; }

}  // namespace

ClientRoute route_client(const GroupReplica& replica) {
  if (replica.sealed()) {
    const auto& members = replica.successor().members();
    const core::NodeId next = members.empty() ? core::NodeId() : core::NodeId(members.Get(0));
    if (next.is_unspecified() || next == replica.self()) return retry("migrating to the next group");
    return {ClientVerdict::redirect, next, "the group migrated to its successor"};
  }
  if (replica.role() != Role::leader) {
    const core::NodeId leader = replica.leader();
    if (leader.is_unspecified() || leader == replica.self()) return retry("electing a leader");
    return {ClientVerdict::redirect, leader, "not the leader"};
  }
  return {ClientVerdict::serve, {}, {}};
}

ReadAdmission admit_read(const GroupReplica& replica) {
  ReadAdmission out;
  out.route = route_client(replica);
  if (out.route.verdict != ClientVerdict::serve) return out;
  if (replica.recovering()) {
    out.route = retry("the leader is taking over: its predecessors' entries are not committed in its term yet");
  } else if (!replica.inherited()) {
    out.route = retry("the leader is still inheriting the previous group's state");
  } else if (!replica.read_lease_held()) {
    out.route = retry("the leader's quorum lease lapsed: another member may lead by now");
  } else if (replica.applied() < replica.commit()) {
    out.route = retry("the leader has not applied its commit point yet");
  } else {
    out.term = replica.leader_term();
    out.read_index = replica.commit();
  }
  return out;
}

}  // namespace mesh::kgroup
