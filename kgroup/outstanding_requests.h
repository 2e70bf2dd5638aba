#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/messenger.h"
#include "kgroup/heartbeat_coalescer.h"

namespace mesh::kgroup {

// The kgroup requests one owner has in flight. Destroying it (or
// cancel_all()) cancels them, so no answer reaches an owner that has changed
// role or no longer exists.
class OutstandingRequests {
 public:
  explicit OutstandingRequests(core::Messenger& messenger) : messenger_(messenger) {}
  OutstandingRequests(const OutstandingRequests&) = delete;
  OutstandingRequests& operator=(const OutstandingRequests&) = delete;
  ~OutstandingRequests() { cancel_all(); }

  void request(core::NodeId dst, std::string body, core::Messenger::ResultCallback callback,
               const core::RetryPolicy& policy);
  // A heartbeat through the host's coalescer, which must outlive this.
  void heartbeat(HeartbeatCoalescer& coalescer, core::NodeId dst, proto::KgroupAppend heartbeat,
                 core::Messenger::ResultCallback callback, const core::RetryPolicy& policy);
  void cancel_all();
  size_t size() const { return pending_.size() + heartbeats_.size(); }

 private:
  core::Messenger& messenger_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, uint64_t> pending_;  // our token -> messenger msg_id (0 until known)
  std::map<uint64_t, std::pair<HeartbeatCoalescer*, HeartbeatCoalescer::Token>> heartbeats_;  // our token -> theirs
};

}  // namespace mesh::kgroup
