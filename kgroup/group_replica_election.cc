// Bully election by priority with terms (CoMesh 3.2) and the new leader's
// take-over of its quorum's log entries (Appendix A.1 case 1).
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/group_replica.h"
#include "kgroup/kgroup_codec.h"
#include "kgroup/replica_requests.h"

namespace mesh::kgroup {
namespace {

int64_t to_ms(core::Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

void GroupReplica::arm_election_timer(core::Duration delay) {
  election_timer_.start(delay, [this] { on_election_timer(); });
}

void GroupReplica::on_election_timer() {
  if (role_ != Role::follower) return;
  if (lease_held()) {
    arm_election_timer(lease_until_ - env_.now());
    return;
  }
  start_election();
}

void GroupReplica::start_election() {
  if (role_ != Role::follower || rebuilding()) return;
  if (!election_started_) {
    election_started_ = env_.now();
    election_trigger_ = preempting_       ? ElectionTrigger::preempt
                        : leader_contact_ ? ElectionTrigger::leader_lost
                                          : ElectionTrigger::first;
  }
  preempting_ = false;
  role_ = Role::electing;
  election_timer_.cancel();
  const std::vector<core::NodeId> higher = higher_live_members();
  if (higher.empty()) {
    become_candidate();
    return;
  }
  bully_.run(ref_, log_.promised_term(), higher, [this](bool defer) { on_bully_done(defer); });
}

void GroupReplica::on_bully_done(bool defer) {
  if (role_ != Role::electing) return;
  if (defer) {
    role_ = Role::follower;
    arm_election_timer(options_.victory_timeout);
    return;
  }
  become_candidate();
}

void GroupReplica::become_candidate() {
  if (const core::Duration wait = promise_wait(self_); wait > core::Duration::zero()) {
    role_ = Role::follower;
    arm_election_timer(wait);
    return;
  }
  const uint64_t term = std::max(log_.promised_term(), highest_seen_term_) + 1;
  if (!log_.promise(term, self_)) {
    role_ = Role::follower;
    arm_election_timer(options_.election_backoff);
    return;
  }
  role_ = Role::candidate;
  candidate_term_ = term;
  leader_ = core::NodeId();
  gathered_ = {self_};
  refused_.clear();
  awaiting_snapshot_.clear();
  refusal_was_silent_ = true;
  retry_after_ = core::Duration::zero();
  merged_.clear();
  const uint64_t from = log_.applied() + 1;
  uint64_t next = from;
  bool more = true;
  while (more) {
    for (const auto& entry : log_.range(next, SIZE_MAX, next, more)) merge(entry);
  }
  core::log("kgroup").debug("claiming group={} epoch={} term={}", ref_.target(), ref_.epoch(), term);
  for (core::NodeId member : config_.members) {
    if (member != self_) send_prepare(member, from);
  }
  if (gathered_.size() >= quorum()) become_leader();
}

void GroupReplica::send_prepare(core::NodeId member, uint64_t from_seq) {
  proto::KgroupBody body;
  auto* prepare = body.mutable_prepare();
  *prepare->mutable_group() = ref_;
  prepare->set_term(candidate_term_);
  prepare->set_from_seq(from_seq);
  const uint64_t term = candidate_term_;
  election_requests_.request(
      member, encode_body(body),
      [this, member, term](const core::RequestResult& result) { on_prepare_result(member, term, result); },
      retrying(options_.prepare_deadline));
}

void GroupReplica::on_prepare_result(core::NodeId member, uint64_t term, const core::RequestResult& result) {
  if (role_ != Role::candidate || candidate_term_ != term) return;
  if (rejected_retired(result)) {
    abandon_candidacy(options_.victory_timeout);
    return;
  }
  if (rejected_unknown_group(result)) {
    // A successor not started there yet: start it.
    if (config_.source) send_start(member, own_start(), [](bool) {});
    note_refusal(member, options_.election_backoff, false);
    return;
  }
  if (result.status != core::RequestStatus::ok) {
    note_refusal(member, core::Duration::zero(), true);
    return;
  }
  const auto body = decode_body(result.response.body);
  if (!body || !body->has_prepare_reply()) {
    note_refusal(member, core::Duration::zero(), true);
    return;
  }
  const proto::KgroupPrepareReply& reply = body->prepare_reply();
  highest_seen_term_ = std::max(highest_seen_term_, reply.term());
  if (!reply.granted()) {
    if (reply.term() > term) {
      abandon_candidacy(core::Duration::zero());
      return;
    }
    note_refusal(member, std::chrono::milliseconds(reply.retry_after_ms()), false);
    return;
  }
  if (reply.snapshot_seq() > log_.applied()) {
    // It compacted entries this candidate has not applied. They are
    // committed, and it may be the only member of this quorum holding them:
    // take its snapshot, then ask it again for what follows.
    core::log("kgroup").debug("claim needs a snapshot group={} term={} member={} applied={} snapshot_seq={}",
                              ref_.target(), term, member.to_string(), log_.applied(), reply.snapshot_seq());
    awaiting_snapshot_.insert(member);
    pull_snapshot(member, reply.snapshot_seq());
    return;
  }
  if (reply.snapshot_seq() != 0) {
    // Compacted where this page began, but no further than what this
    // candidate installed meanwhile: its entries start after that.
    send_prepare(member, log_.applied() + 1);
    return;
  }
  for (const auto& entry : reply.entries()) merge(entry);
  if (reply.more()) {
    send_prepare(member, reply.next_seq());
    return;
  }
  gathered_.insert(member);
  if (gathered_.size() >= quorum()) become_leader();
}

void GroupReplica::note_refusal(core::NodeId member, core::Duration retry_after, bool silent) {
  refused_.insert(member);
  retry_after_ = std::max(retry_after_, retry_after);
  if (!silent) refusal_was_silent_ = false;
  if (config_.members.size() - refused_.size() >= quorum()) return;
  // Lacking answers altogether (not refusals) means this member cannot reach
  // a quorum: it stops standing for a while so that lower-priority members
  // that can do not defer to it forever.
  if (refusal_was_silent_) not_standing_until_ = env_.now() + options_.victory_timeout;
  abandon_candidacy(retry_after_);
}

void GroupReplica::abandon_candidacy(core::Duration retry_after) {
  election_requests_.cancel_all();
  merged_.clear();
  role_ = Role::follower;
  const auto backoff = options_.election_backoff.count();
  const core::Duration jittered(backoff + static_cast<int64_t>(env_.rng().below(static_cast<uint64_t>(backoff) + 1)));
  arm_election_timer(std::max(retry_after, jittered));
}

void GroupReplica::merge(const proto::KgroupEntry& entry) {
  const auto it = merged_.find(entry.seq());
  if (it == merged_.end() || it->second.term() < entry.term()) merged_[entry.seq()] = entry;
}

void GroupReplica::become_leader() {
  const uint64_t term = candidate_term_;
  election_requests_.cancel_all();
  // Keep every entry seen at one or more of the quorum, up to the first gap:
  // a committed entry is at f + 1 members, so in every quorum, and everything
  // after a gap was never committed (the leader commits in order).
  // Nothing follows a seal: entries after one were proposed by leaders that
  // had not seen it, and none of them can have been committed (a committed
  // entry after the seal would make the seal's slot committed with another
  // entry, which the highest-term rule would have picked instead).
  uint64_t seq = log_.applied() + 1;
  bool past_seal = sealed_;
  for (; !past_seal; ++seq) {
    const auto it = merged_.find(seq);
    if (it == merged_.end()) break;
    past_seal = it->second.kind() == proto::KGROUP_SEAL;
    proto::KgroupEntry entry = it->second;
    entry.set_term(term);
    if (!log_.put(entry)) {
      core::log("kgroup").error("storage failed during take-over group={} seq={}", ref_.target(), seq);
      merged_.clear();
      role_ = Role::follower;
      arm_election_timer(options_.lease);
      return;
    }
  }
  merged_.clear();
  const uint64_t last = seq - 1;
  log_.truncate_after(last);
  role_ = Role::leader;
  leader_ = self_;
  leader_term_ = term;
  recovering_ = true;
  recovery_target_ = last;
  next_seq_ = last + 1;
  commit_ = log_.applied();
  leader_since_ = env_.now();
  sealing_ = false;
  pulling_ = false;
  inheriting_ = false;
  pull_buffer_.clear();
  started_.clear();
  decommissioned_.clear();
  progress_.clear();
  for (core::NodeId member : config_.members) {
    if (member != self_) progress_[member] = FollowerProgress{log_.applied() + 1, 0, false, core::TimePoint::min()};
  }
  election_timer_.cancel();
  const core::TimePoint now = env_.now();
  const double electing_ms = election_started_ ? core::to_millis(now - *election_started_) : 0.0;
  const double gap_ms = leader_contact_ ? core::to_millis(now - *leader_contact_) : 0.0;
  if (hooks_.metrics != nullptr && election_started_) {
    std::optional<core::Duration> gap;
    if (leader_contact_) gap = now - *leader_contact_;
    hooks_.metrics->election(election_trigger_, now - *election_started_, gap);
  }
  core::log("kgroup").info(
      "leader group={} epoch={} generation={} term={} recovered_to={} trigger={} electing_ms={:.1f} gap_ms={:.1f}",
      ref_.target(), ref_.epoch(), ref_.generation(), term, last, to_string(election_trigger_), electing_ms, gap_ms);
  election_started_.reset();
  leader_contact_.reset();
  pull_started_.reset();
  if (on_elected_) on_elected_(term);
  if (hooks_.heartbeats == nullptr)
    heartbeat_timer_.start_periodic(options_.heartbeat_interval, [this] { on_heartbeat(); });
  for (auto& [member, progress] : progress_) send_append(member);
  advance_commit();
}

void GroupReplica::step_down(core::Duration wait) {
  std::vector<SubmitCallback> unknown;
  std::vector<SubmitCallback> refused;
  if (role_ == Role::leader) {
    core::log("kgroup").info("stepping down group={} epoch={} term={}", ref_.target(), ref_.epoch(), leader_term_);
    for (auto& [seq, pending] : pending_) unknown.push_back(std::move(pending.callback));
    leader_contact_ = env_.now();
    for (auto& [update, callback] : queued_) refused.push_back(std::move(callback));
    pending_.clear();
    queued_.clear();
    heartbeat_timer_.cancel();
    epoch_timer_.cancel();
    migration_timer_.cancel();
    leader_requests_.cancel_all();
    migration_requests_.cancel_all();
    start_inflight_.clear();
    decommission_inflight_.clear();
    progress_.clear();
  }
  bully_.cancel();
  election_requests_.cancel_all();
  merged_.clear();
  role_ = Role::follower;
  leader_ = core::NodeId();
  recovering_ = false;
  sealing_ = false;
  pulling_ = false;
  inheriting_ = false;
  arm_election_timer(wait);
  for (auto& callback : unknown) {
    if (callback) callback({SubmitStatus::unknown, 0, core::NodeId()});
  }
  for (auto& callback : refused) callback({SubmitStatus::not_leader, 0, core::NodeId()});
}

void GroupReplica::handle_election(const core::Message& request, core::Responder responder) {
  const bool following = lease_held();
  const bool standing = !rebuilding() && (role_ == Role::leader || role_ == Role::electing ||
                                          role_ == Role::candidate || following || env_.now() >= not_standing_until_);
  proto::KgroupBody body;
  auto* answer = body.mutable_election_answer();
  answer->set_term(log_.promised_term());
  if (role_ == Role::leader || following) answer->set_leader(leader_.value());
  answer->set_standing(standing);
  responder.respond(encode_body(body));
  if (role_ == Role::leader) {
    // The asker lost our heartbeats: send one now rather than at the next tick.
    auto it = progress_.find(request.src);
    if (it != progress_.end() && !it->second.inflight) send_append(request.src);
  } else if (role_ == Role::follower && !following && standing) {
    start_election();
  }
}

void GroupReplica::handle_prepare(const core::Message& request, const proto::KgroupPrepare& prepare,
                                  core::Responder responder) {
  const core::NodeId src = request.src;
  const uint64_t term = prepare.term();
  proto::KgroupBody body;
  auto* reply = body.mutable_prepare_reply();
  reply->set_applied(log_.applied());
  auto refuse = [&](core::Duration retry_after) {
    reply->set_granted(false);
    reply->set_term(log_.promised_term());
    if (!leader_.is_unspecified()) reply->set_leader(leader_.value());
    reply->set_retry_after_ms(static_cast<uint64_t>(std::max<int64_t>(to_ms(retry_after), 0)));
    responder.respond(encode_body(body));
  };
  highest_seen_term_ = std::max(highest_seen_term_, term);
  if (rebuilding()) {
    // Not even a claim this member promised before its restart: its entries
    // are gone, so what it would hand over could lack a committed one.
    refuse(options_.lease);
    return;
  }
  const bool continuing = term == log_.promised_term() && log_.promised_to() == src;
  if (!continuing) {
    if (term <= log_.promised_term() || !is_member(src)) {
      refuse(core::Duration::zero());
      return;
    }
    if (const core::Duration wait = promise_wait(src); wait > core::Duration::zero()) {
      refuse(wait);
      return;
    }
    if (role_ == Role::leader) {
      if (rank_of(src) > rank_of(self_)) {
        // A lower-priority member claims while we lead: it lost our
        // heartbeats; it must wait for the lease we may still hold.
        refuse(options_.lease);
        return;
      }
      // A higher-priority member claims: it let our lease lapse first (see
      // preempting_), so stand aside.
      step_down(options_.victory_timeout);
    }
    if (!log_.promise(term, src)) {
      refuse(options_.election_backoff);
      return;
    }
    if (role_ != Role::follower) step_down(options_.victory_timeout);
    leader_ = core::NodeId();
    arm_election_timer(options_.victory_timeout);
  }
  reply->set_granted(true);
  reply->set_term(term);
  uint64_t next = prepare.from_seq();
  bool more = false;
  if (prepare.from_seq() <= snapshot_seq_) {
    // Compacted away here: the candidate takes the snapshot, then asks again.
    reply->set_snapshot_seq(snapshot_seq_);
  } else {
    for (auto& entry : log_.range(prepare.from_seq(), options_.max_batch_bytes, next, more)) {
      *reply->add_entries() = std::move(entry);
    }
  }
  reply->set_more(more);
  reply->set_next_seq(next);
  responder.respond(encode_body(body));
}

}  // namespace mesh::kgroup
