// Which member answers a client: the routing every client request (write or
// read) gets at a member of the target's group, and the admission of a
// linearizable read at the leader.
#pragma once

#include <cstdint>
#include <string>

#include "core/node_id.h"

namespace mesh::kgroup {

class GroupReplica;

enum class ClientVerdict {
  serve,     // this member answers now
  redirect,  // ask `next` instead
  retry,     // nobody can answer yet (election, take-over, migration, lease): ask again soon
};

struct ClientRoute {
  ClientVerdict verdict = ClientVerdict::retry;
  core::NodeId next;   // redirect: the member to ask
  std::string reason;  // redirect, retry: why not here (goes into the client's error on timeout)
};

// A request reaching `replica`'s member: served if it leads the group,
// else redirected to the leader it follows (or to the first member of the
// successor once the group is sealed), else retried while it elects.
ClientRoute route_client(const GroupReplica& replica);

// A read the leader may answer now, and what the answer reflects.
struct ReadAdmission {
  ClientRoute route;
  uint64_t term = 0;        // serve: the term the leader holds
  uint64_t read_index = 0;  // serve: the commit point its state machine has applied
};

// ReadIndex with a lease (Raft thesis 6.4): a member answers a read only
// while it leads, has finished its take-over (every entry a predecessor may
// have committed is committed under its own term, so its commit point is
// the group's), has its inherited state, holds its quorum lease (no quorum
// can have elected anyone else: followers promise nothing while they hold
// its lease), and has applied up to the commit point it holds. Its answer
// then contains every write acknowledged before the read arrived, and only
// committed writes. Anything else answers redirect or retry, never a stale
// copy: a follower behind the leader, or a deposed leader cut off in a
// minority, would serve one.
ReadAdmission admit_read(const GroupReplica& replica);

}  // namespace mesh::kgroup
