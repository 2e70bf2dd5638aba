#include "kgroup/outstanding_requests.h"

#include <utility>
#include <vector>

#include "proto/wire.pb.h"

namespace mesh::kgroup {

void OutstandingRequests::request(core::NodeId dst, std::string body, core::Messenger::ResultCallback callback,
                                  const core::RetryPolicy& policy) {
  const uint64_t token = next_token_++;
  pending_[token] = 0;
  // The messenger may answer from inside request() (a body too large), so the
  // token is registered first and only completed later if still pending.
  const uint64_t msg_id = messenger_.request(
      dst, proto::Envelope::kKgroupFieldNumber, std::move(body),
      [this, token, callback = std::move(callback)](const core::RequestResult& result) {
        pending_.erase(token);
        callback(result);
      },
      policy);
  if (auto it = pending_.find(token); it != pending_.end()) it->second = msg_id;
}

void OutstandingRequests::heartbeat(HeartbeatCoalescer& coalescer, core::NodeId dst, proto::KgroupAppend heartbeat,
                                    core::Messenger::ResultCallback callback, const core::RetryPolicy& policy) {
  const uint64_t token = next_token_++;
  const HeartbeatCoalescer::Token theirs = coalescer.send(
      dst, std::move(heartbeat),
      [this, token, callback = std::move(callback)](const core::RequestResult& result) {
        heartbeats_.erase(token);
        callback(result);
      },
      policy);
  heartbeats_[token] = {&coalescer, theirs};
}

void OutstandingRequests::cancel_all() {
  std::vector<uint64_t> ids;
  for (const auto& [token, id] : pending_) ids.push_back(id);
  pending_.clear();
  for (uint64_t id : ids) messenger_.cancel(id);
  const auto heartbeats = std::move(heartbeats_);
  heartbeats_.clear();
  for (const auto& [token, theirs] : heartbeats) theirs.first->cancel(theirs.second);
}

}  // namespace mesh::kgroup
