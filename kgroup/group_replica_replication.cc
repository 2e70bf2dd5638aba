// Leading (CoMesh 3.3): ordering submissions, replicating them with
// heartbeats that renew the followers' lease, committing at a quorum, and the
// follower's side of appends.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/group_replica.h"
#include "kgroup/kgroup_codec.h"
#include "kgroup/replica_requests.h"

namespace mesh::kgroup {

bool GroupReplica::quorum_lease_valid(core::TimePoint at, core::Duration slack) const {
  if (role_ != Role::leader) return false;
  std::vector<core::TimePoint> acks{at};
  for (const auto& [member, progress] : progress_) {
    acks.push_back(progress.voting ? progress.acked_sent : core::TimePoint::min());
  }
  std::sort(acks.begin(), acks.end(), std::greater<>());
  const core::TimePoint start = acks[quorum() - 1];
  if (start == core::TimePoint::min()) return false;
  return at < start + options_.lease - slack;
}

bool GroupReplica::can_read() const { return role_ == Role::leader && !recovering_ && inherited_ && read_lease_held(); }

bool GroupReplica::read_lease_held() const { return quorum_lease_valid(env_.now(), options_.lease_margin); }

bool GroupReplica::serving() const {
  return role_ == Role::leader && !recovering_ && inherited_ && !sealing_ && !sealed_;
}

void GroupReplica::heartbeat_tick() { on_heartbeat(); }

void GroupReplica::on_heartbeat() {
  if (role_ != Role::leader) return;
  const core::TimePoint now = env_.now();
  if (now - leader_since_ > options_.lease && !quorum_lease_valid(now, core::Duration::zero())) {
    // No quorum has heard this leader for a whole lease: the followers may
    // already be electing. Stand aside instead of proposing into the void.
    step_down(options_.election_backoff);
    return;
  }
  if (view_grew_) {
    view_grew_ = false;
    maybe_reselect();
  }
  for (auto& [member, progress] : progress_) {
    if (!progress.inflight) send_append(member);
  }
}

void GroupReplica::send_append(core::NodeId member) {
  FollowerProgress& progress = progress_[member];
  proto::KgroupBody body;
  auto* append = body.mutable_append();
  *append->mutable_group() = ref_;
  append->set_term(leader_term_);
  append->set_commit(commit_);
  append->set_last_seq(next_seq_ - 1);
  uint64_t next = progress.next;
  bool more = false;
  if (progress.next <= snapshot_seq_) {
    // Compacted away here: the follower pulls the snapshot, then the entries
    // after it come as usual.
    append->set_snapshot_seq(snapshot_seq_);
  } else if (progress.next < next_seq_) {
    for (auto& entry : log_.range(progress.next, options_.max_batch_bytes, next, more)) {
      *append->add_entries() = std::move(entry);
    }
  }
  progress.inflight = true;
  const uint64_t term = leader_term_;
  const core::TimePoint sent = env_.now();
  auto on_result = [this, member, term, sent](const core::RequestResult& result) {
    on_append_result(member, term, sent, result);
  };
  // Retransmissions are safe for the lease: a follower renews it when it
  // first handles the append, never before `sent`, which is what the leader
  // counts from (acked_sent). A coalesced heartbeat leaves no earlier than
  // `sent` either.
  if (hooks_.heartbeats != nullptr && append->entries().empty() && append->snapshot_seq() == 0) {
    leader_requests_.heartbeat(*hooks_.heartbeats, member, std::move(*append), std::move(on_result),
                               append_attempt(options_.append_timeout));
    return;
  }
  leader_requests_.request(member, encode_body(body), std::move(on_result), append_attempt(options_.append_timeout));
}

void GroupReplica::on_append_result(core::NodeId member, uint64_t term, core::TimePoint sent,
                                    const core::RequestResult& result) {
  if (role_ != Role::leader || leader_term_ != term) return;
  FollowerProgress& progress = progress_[member];
  progress.inflight = false;
  if (rejected_retired(result)) {
    step_down(options_.victory_timeout);
    return;
  }
  if (rejected_unknown_group(result) && config_.source) {
    send_start(member, own_start(), [](bool) {});
    return;
  }
  if (result.status != core::RequestStatus::ok) return;
  const auto body = decode_body(result.response.body);
  if (!body || !body->has_append_reply()) return;
  const proto::KgroupAppendReply& reply = body->append_reply();
  if (reply.term() > term) {
    highest_seen_term_ = std::max(highest_seen_term_, reply.term());
    step_down(options_.lease);
    return;
  }
  if (!reply.ok()) return;
  progress.voting = !reply.rebuilding();
  progress.acked_sent = std::max(progress.acked_sent, sent);
  progress.match = std::min(reply.match(), next_seq_ - 1);
  progress.next = progress.match + 1;
  advance_commit();
  if (role_ == Role::leader && leader_term_ == term && progress_[member].next < next_seq_ &&
      !progress_[member].inflight) {
    send_append(member);
  }
}

void GroupReplica::advance_commit() {
  if (role_ != Role::leader) return;
  uint64_t commit = commit_;
  while (commit + 1 < next_seq_) {
    size_t copies = 1;
    for (const auto& [member, progress] : progress_) {
      if (progress.voting && progress.match >= commit + 1) ++copies;
    }
    if (copies < quorum()) break;
    ++commit;
  }
  commit_ = commit;
  apply_up_to(commit_);
  std::vector<std::pair<uint64_t, SubmitCallback>> done;
  while (!pending_.empty() && pending_.begin()->first <= log_.applied()) {
    Pending& pending = pending_.begin()->second;
    // Only submissions have a callback; seal and inherited-state entries have their own measures.
    if (pending.callback && hooks_.metrics != nullptr) hooks_.metrics->quorum_commit(env_.now() - pending.proposed);
    done.emplace_back(pending_.begin()->first, std::move(pending.callback));
    pending_.erase(pending_.begin());
  }
  const uint64_t term = leader_term_;
  for (auto& [seq, callback] : done) {
    if (callback) callback({SubmitStatus::committed, seq, self_});
  }
  if (role_ == Role::leader && leader_term_ == term) progress_leadership();
}

void GroupReplica::progress_leadership() {
  // Steps below commit entries, which calls back here; run again instead of
  // recursing.
  if (draining_) {
    progress_again_ = true;
    return;
  }
  draining_ = true;
  const uint64_t term = leader_term_;
  do {
    progress_again_ = false;
    if (recovering_ && commit_ >= recovery_target_) {
      recovering_ = false;
      core::log("kgroup").debug("take-over complete group={} term={} commit={}", ref_.target(), term, commit_);
    }
    if (recovering_) break;
    if (!inherited_) {
      pull_state();
    } else if (sealed_) {
      std::vector<SubmitCallback> moved;
      for (auto& [update, callback] : queued_) moved.push_back(std::move(callback));
      queued_.clear();
      for (auto& callback : moved) callback({SubmitStatus::migrated, 0, core::NodeId()});
      // Sealed before it finished decommissioning its own source: keep at it.
      if (role_ == Role::leader && leader_term_ == term && config_.source) send_decommissions();
      if (role_ == Role::leader && leader_term_ == term) send_starts(false);
    } else if (!sealing_) {
      // Submissions that waited for the take-over go in now, in arrival order.
      while (role_ == Role::leader && leader_term_ == term && serving() && !queued_.empty()) {
        auto [update, callback] = std::move(queued_.front());
        queued_.pop_front();
        proto::KgroupEntry entry;
        entry.set_data(std::move(update));
        propose(std::move(entry), std::move(callback));
      }
      if (role_ == Role::leader && leader_term_ == term) {
        arm_epoch_timer();
        if (config_.source) send_decommissions();
        maybe_reselect();
      }
    }
  } while (progress_again_ && role_ == Role::leader && leader_term_ == term);
  draining_ = false;
}

void GroupReplica::submit(std::string update, SubmitCallback callback) {
  if (update.size() > options_.max_update_bytes) {
    callback({SubmitStatus::too_large, 0, leader_});
    return;
  }
  if (role_ != Role::leader) {
    callback({SubmitStatus::not_leader, 0, leader_});
    return;
  }
  if (sealing_ || sealed_) {
    callback({SubmitStatus::migrated, 0, core::NodeId()});
    return;
  }
  if (recovering_ || !inherited_) {
    if (queued_.size() >= options_.max_queued) {
      callback({SubmitStatus::overloaded, 0, self_});
      return;
    }
    queued_.emplace_back(std::move(update), std::move(callback));
    return;
  }
  proto::KgroupEntry entry;
  entry.set_data(std::move(update));
  propose(std::move(entry), std::move(callback));
}

bool GroupReplica::propose(proto::KgroupEntry entry, SubmitCallback callback) {
  entry.set_seq(next_seq_);
  entry.set_term(leader_term_);
  if (!log_.put(entry)) {
    if (callback) callback({SubmitStatus::storage_error, 0, self_});
    return false;
  }
  ++next_seq_;
  pending_[entry.seq()] = Pending{std::move(callback), env_.now()};
  for (auto& [member, progress] : progress_) {
    if (!progress.inflight) send_append(member);
  }
  advance_commit();
  return true;
}

void GroupReplica::handle_append(const core::Message& request, const proto::KgroupAppend& append,
                                 core::Responder responder) {
  const core::NodeId src = request.src;
  const uint64_t term = append.term();
  proto::KgroupBody body;
  auto* reply = body.mutable_append_reply();
  highest_seen_term_ = std::max(highest_seen_term_, term);
  auto refuse = [&] {
    reply->set_ok(false);
    reply->set_term(log_.promised_term());
    responder.respond(encode_body(body));
  };
  if (term < log_.promised_term() || !is_member(src) || src == self_) {
    refuse();
    return;
  }
  if (preempting_ && rank_of(src) > rank_of(self_)) {
    refuse();
    return;
  }
  if (term > log_.promised_term() || log_.promised_to() != src) {
    // Only a leader holding a quorum of promises sends appends for a term, so
    // accepting one is accepting that leader.
    if (!log_.promise(term, src)) {
      refuse();
      return;
    }
  }
  if (role_ != Role::follower) step_down(options_.lease);
  leader_ = src;
  leader_term_ = term;
  leader_contact_ = env_.now();
  election_started_.reset();
  lease_until_ = env_.now() + options_.lease;
  arm_election_timer(options_.lease);
  if (synced_term_ != term) {
    synced_term_ = term;
    synced_ = log_.applied();
  }
  bool stored = true;
  uint64_t expected = synced_ + 1;
  for (const proto::KgroupEntry& entry : append.entries()) {
    if (entry.seq() < expected) continue;  // already held (applied, or sent before)
    if (entry.seq() > expected) break;     // a gap: report where we are, the leader backs up
    if (!log_.put(entry)) {
      stored = false;
      break;
    }
    synced_ = entry.seq();
    ++expected;
  }
  apply_up_to(std::min(append.commit(), synced_));
  if (log_.rebuilding() == ReplicatedLog::Damage::entries && stored && synced_ >= append.last_seq() &&
      log_.applied() >= append.commit()) {
    // Everything this leader holds, so every committed entry, is stored again.
    if (log_.finish_rebuild()) {
      core::log("kgroup").info("rebuilt group={} epoch={} generation={} seq={}; voting again", ref_.target(),
                               ref_.epoch(), ref_.generation(), synced_);
    }
  }
  reply->set_rebuilding(rebuilding());
  reply->set_ok(stored);
  reply->set_term(term);
  reply->set_match(synced_);
  responder.respond(encode_body(body));
  // The leader compacted away the entries that come next for us.
  if (append.snapshot_seq() > synced_) pull_snapshot(src, append.snapshot_seq());
  if (rank_of(self_) < rank_of(src) && synced_ >= append.commit() && env_.now() >= not_standing_until_ && !sealed_ &&
      !rebuilding()) {
    // We outrank this leader: stop renewing its lease and claim once it lapses.
    preempting_ = true;
    core::log("kgroup").debug("pre-empting group={} leader={} term={}", ref_.target(), src.to_string(), term);
  }
}

}  // namespace mesh::kgroup
