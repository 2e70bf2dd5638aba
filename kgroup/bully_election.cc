#include "kgroup/bully_election.h"

#include <utility>

#include "kgroup/kgroup_codec.h"

namespace mesh::kgroup {

BullyElection::BullyElection(core::Messenger& messenger, core::RetryPolicy answer_policy)
    : policy_(answer_policy), requests_(messenger) {}

void BullyElection::run(const proto::KgroupRef& group, uint64_t term, const std::vector<core::NodeId>& higher,
                        Done done) {
  cancel();
  done_ = std::move(done);
  waiting_ = std::set<core::NodeId>(higher.begin(), higher.end());
  proto::KgroupBody body;
  auto* election = body.mutable_election();
  *election->mutable_group() = group;
  election->set_term(term);
  const std::string bytes = encode_body(body);
  for (core::NodeId member : waiting_) {
    requests_.request(
        member, bytes,
        [this, member](const core::RequestResult& result) {
          if (!done_) return;
          if (result.status == core::RequestStatus::ok) {
            const auto answer = decode_body(result.response.body);
            if (answer && answer->has_election_answer() && answer->election_answer().standing()) {
              finish(true);
              return;
            }
          }
          waiting_.erase(member);
          if (waiting_.empty()) finish(false);
        },
        policy_);
  }
  if (waiting_.empty()) finish(false);
}

void BullyElection::cancel() {
  requests_.cancel_all();
  waiting_.clear();
  done_ = nullptr;
}

void BullyElection::finish(bool defer) {
  Done done = std::move(done_);
  done_ = nullptr;
  requests_.cancel_all();
  waiting_.clear();
  if (done) done(defer);
}

}  // namespace mesh::kgroup
