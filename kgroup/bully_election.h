#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "core/messenger.h"
#include "kgroup/outstanding_requests.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// The asking half of the Bully algorithm (Garcia-Molina 1982, as the floating
// managers of scopes-floating-managers.md use it, priority = selection
// score): before claiming leadership a member asks every live member of
// higher priority whether it stands. If one does, the asker defers and waits
// for that member's victory; if none answers in time (or all decline), the
// asker goes on to claim the term itself. The answering half belongs to
// GroupReplica, which knows its own role.
class BullyElection {
 public:
  // defer: a higher-priority member stands (it answered standing = true).
  using Done = std::function<void(bool defer)>;

  BullyElection(core::Messenger& messenger, core::RetryPolicy answer_policy);

  // Calls `done` once unless cancelled or run again: later, when answers
  // arrive or time out, or from inside run() when `higher` is empty.
  void run(const proto::KgroupRef& group, uint64_t term, const std::vector<core::NodeId>& higher, Done done);
  void cancel();
  bool running() const { return static_cast<bool>(done_); }

 private:
  void finish(bool defer);

  core::RetryPolicy policy_;
  OutstandingRequests requests_;
  std::set<core::NodeId> waiting_;
  Done done_;
};

}  // namespace mesh::kgroup
