#include "kgroup/group_replica.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/hash_selection.h"
#include "kgroup/kgroup_codec.h"

namespace mesh::kgroup {
namespace {

int64_t to_ms(core::Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

core::RetryPolicy single_attempt(core::Duration timeout) {
  core::RetryPolicy policy;
  policy.first_timeout = timeout;
  policy.deadline = timeout;
  policy.jitter = 0.0;
  return policy;
}

core::RetryPolicy retrying(core::Duration deadline) {
  core::RetryPolicy policy;
  policy.first_timeout = std::max(deadline / 4, core::Duration(std::chrono::milliseconds(1)));
  policy.backoff = 1.5;
  policy.max_interval = deadline;
  policy.deadline = deadline;
  return policy;
}

proto::KgroupRef make_ref(const GroupTarget& target, uint64_t epoch, uint32_t generation) {
  proto::KgroupRef ref;
  ref.set_target(target.to_string());
  ref.set_epoch(epoch);
  ref.set_generation(generation);
  return ref;
}

}  // namespace

std::string_view to_string(Role role) {
  switch (role) {
    case Role::follower:
      return "follower";
    case Role::electing:
      return "electing";
    case Role::candidate:
      return "candidate";
    case Role::leader:
      return "leader";
  }
  return "follower";
}

std::string_view to_string(SubmitStatus status) {
  switch (status) {
    case SubmitStatus::committed:
      return "committed";
    case SubmitStatus::not_leader:
      return "not_leader";
    case SubmitStatus::unknown:
      return "unknown";
    case SubmitStatus::migrated:
      return "migrated";
    case SubmitStatus::too_large:
      return "too_large";
    case SubmitStatus::storage_error:
      return "storage_error";
    case SubmitStatus::overloaded:
      return "overloaded";
  }
  return "unknown";
}

GroupReplica::GroupReplica(core::Env& env, core::Messenger& messenger, core::Storage& storage,
                           membership::MemberView& view, GroupConfig config, StateMachine& state_machine,
                           ReplicaOptions options, ReplicaHooks hooks)
    : env_(env),
      view_(view),
      config_(std::move(config)),
      ref_(make_ref(config_.target, config_.epoch, config_.generation)),
      state_machine_(state_machine),
      options_(options),
      hooks_(std::move(hooks)),
      self_(messenger.self()),
      log_(storage, config_.target.to_string(), config_.epoch, config_.generation),
      bully_(messenger, retrying(options.answer_timeout)),
      election_requests_(messenger),
      leader_requests_(messenger),
      migration_requests_(messenger),
      election_timer_(env),
      heartbeat_timer_(env),
      epoch_timer_(env),
      migration_timer_(env) {}

GroupReplica::~GroupReplica() = default;

// ---- membership and priorities ------------------------------------------------

size_t GroupReplica::rank_of(core::NodeId id) const {
  const auto it = std::find(config_.members.begin(), config_.members.end(), id);
  return static_cast<size_t>(it - config_.members.begin());
}

bool GroupReplica::is_live(core::NodeId id) const {
  if (id == self_) return true;
  const auto member = view_.member(id);
  return member &&
         (member->state == membership::MemberState::alive || member->state == membership::MemberState::suspect);
}

std::vector<core::NodeId> GroupReplica::higher_live_members() const {
  std::vector<core::NodeId> out;
  for (core::NodeId id : config_.members) {
    if (id == self_) break;
    if (is_live(id)) out.push_back(id);
  }
  return out;
}

size_t GroupReplica::quorum() const { return quorum_size(config_.members.size()); }

bool GroupReplica::lease_held() const {
  return role_ == Role::follower && !leader_.is_unspecified() && env_.now() < lease_until_;
}

core::Duration GroupReplica::promise_wait(core::NodeId candidate) const {
  const core::TimePoint now = env_.now();
  core::Duration wait = core::Duration::zero();
  if (now < no_promise_until_) wait = no_promise_until_ - now;
  if (lease_held() && leader_ != candidate) wait = std::max(wait, lease_until_ - now);
  return wait;
}

void GroupReplica::on_member_event(const membership::MemberEvent& event) {
  const bool gone =
      event.kind == membership::MemberEventKind::failed || event.kind == membership::MemberEventKind::left;
  if (!gone || event.member.id == self_ || !is_member(event.member.id)) return;
  if (role_ == Role::follower && event.member.id == leader_) {
    // A failed leader always triggers an election (CoMesh 3.5); promises are
    // still refused until the followers' leases run out, which keeps a leader
    // that was only suspected from serving stale reads.
    core::log("kgroup").debug("leader failed group={} epoch={} leader={}", ref_.target(), ref_.epoch(),
                              leader_.to_string());
    leader_ = core::NodeId();
    start_election();
    return;
  }
  maybe_reselect();
}

void GroupReplica::maybe_reselect() {
  if (!serving() || !hooks_.select) return;
  // Re-selection (CoMesh 3.5): only once f members have failed, not on
  // every failure; the group then hands over to the k best live nodes.
  size_t failed = 0;
  for (core::NodeId id : config_.members) failed += is_live(id) ? 0 : 1;
  const size_t f = faults_tolerated(config_.members.size());
  if (f == 0 || failed < f) return;
  if (hooks_.select(config_.target, config_.epoch) == config_.members) return;
  core::log("kgroup").info("re-selecting group={} epoch={} generation={} failed={}", ref_.target(), ref_.epoch(),
                           ref_.generation(), failed);
  seal(config_.epoch, config_.generation + 1);
}

// ---- start and elections ------------------------------------------------------

void GroupReplica::start() {
  if (!log_.load()) {
    core::log("kgroup").error("group state partly unreadable group={} epoch={}", ref_.target(), ref_.epoch());
  }
  proto::KgroupConfigRecord record;
  *record.mutable_group() = ref_;
  for (core::NodeId id : config_.members) record.add_members(id.value());
  if (config_.source) {
    *record.mutable_source() = make_ref(config_.target, config_.source->epoch, config_.source->generation);
    for (core::NodeId id : config_.source->members) record.add_source_members(id.value());
  }
  if (!log_.save_config(record)) {
    core::log("kgroup").error("could not persist group config group={} epoch={}", ref_.target(), ref_.epoch());
  }
  inherited_ = !config_.source.has_value();
  // Rebuild the state machine from the applied prefix: applied entries are
  // committed, so every copy of them is the committed one.
  const uint64_t applied = log_.applied();
  uint64_t replayed = 0;
  for (uint64_t seq = 1; seq <= applied; ++seq) {
    const proto::KgroupEntry* entry = log_.get(seq);
    if (entry == nullptr) break;
    apply_entry(*entry);
    replayed = seq;
  }
  if (replayed != applied) log_.set_applied(replayed);
  synced_ = replayed;
  role_ = Role::follower;
  // Only an earlier incarnation that promised something can have a lease
  // outstanding.
  if (log_.promised_term() > 0) no_promise_until_ = env_.now() + options_.lease;
  if (higher_live_members().empty()) {
    start_election();
  } else {
    arm_election_timer(options_.lease);
  }
}

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
  if (role_ != Role::follower) return;
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

bool GroupReplica::rejected_unknown_group(const core::RequestResult& result) {
  return result.status == core::RequestStatus::rejected && result.response.body == "unknown_group";
}

bool GroupReplica::rejected_retired(const core::RequestResult& result) {
  if (result.status != core::RequestStatus::rejected || result.response.body != "retired") return false;
  // A node decommissioned this group, which happens only once its successor
  // inherited the sealed state: this member missed its own decommission.
  core::log("kgroup").info("group retired elsewhere group={} epoch={} generation={}", ref_.target(), ref_.epoch(),
                           ref_.generation());
  if (hooks_.retired) hooks_.retired();
  return true;
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
  core::log("kgroup").info("leader group={} epoch={} generation={} term={} recovered_to={}", ref_.target(),
                           ref_.epoch(), ref_.generation(), term, last);
  if (on_elected_) on_elected_(term);
  heartbeat_timer_.start_periodic(options_.heartbeat_interval, [this] { on_heartbeat(); });
  for (auto& [member, progress] : progress_) send_append(member);
  advance_commit();
}

void GroupReplica::step_down(core::Duration wait) {
  std::vector<SubmitCallback> unknown;
  std::vector<SubmitCallback> refused;
  if (role_ == Role::leader) {
    core::log("kgroup").info("stepping down group={} epoch={} term={}", ref_.target(), ref_.epoch(), leader_term_);
    for (auto& [seq, callback] : pending_) unknown.push_back(std::move(callback));
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

// ---- leading ---------------------------------------------------------------------

bool GroupReplica::quorum_lease_valid(core::TimePoint at, core::Duration slack) const {
  if (role_ != Role::leader) return false;
  std::vector<core::TimePoint> acks{at};
  for (const auto& [member, progress] : progress_) acks.push_back(progress.acked_sent);
  std::sort(acks.begin(), acks.end(), std::greater<>());
  const core::TimePoint start = acks[quorum() - 1];
  if (start == core::TimePoint::min()) return false;
  return at < start + options_.lease - slack;
}

bool GroupReplica::can_read() const {
  return role_ == Role::leader && !recovering_ && inherited_ && quorum_lease_valid(env_.now(), options_.lease_margin);
}

bool GroupReplica::serving() const {
  return role_ == Role::leader && !recovering_ && inherited_ && !sealing_ && !sealed_;
}

void GroupReplica::on_heartbeat() {
  if (role_ != Role::leader) return;
  const core::TimePoint now = env_.now();
  if (now - leader_since_ > options_.lease && !quorum_lease_valid(now, core::Duration::zero())) {
    // No quorum has heard this leader for a whole lease: the followers may
    // already be electing. Stand aside instead of proposing into the void.
    step_down(options_.election_backoff);
    return;
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
  uint64_t next = progress.next;
  bool more = false;
  if (progress.next < next_seq_) {
    for (auto& entry : log_.range(progress.next, options_.max_batch_bytes, next, more)) {
      *append->add_entries() = std::move(entry);
    }
  }
  progress.inflight = true;
  const uint64_t term = leader_term_;
  const core::TimePoint sent = env_.now();
  leader_requests_.request(
      member, encode_body(body),
      [this, member, term, sent](const core::RequestResult& result) { on_append_result(member, term, sent, result); },
      single_attempt(options_.append_timeout));
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
      if (progress.match >= commit + 1) ++copies;
    }
    if (copies < quorum()) break;
    ++commit;
  }
  commit_ = commit;
  apply_up_to(commit_);
  std::vector<std::pair<uint64_t, SubmitCallback>> done;
  while (!pending_.empty() && pending_.begin()->first <= log_.applied()) {
    done.emplace_back(pending_.begin()->first, std::move(pending_.begin()->second));
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
  pending_[entry.seq()] = std::move(callback);
  for (auto& [member, progress] : progress_) {
    if (!progress.inflight) send_append(member);
  }
  advance_commit();
  return true;
}

void GroupReplica::apply_up_to(uint64_t upto) {
  uint64_t applied = log_.applied();
  while (applied < upto) {
    const proto::KgroupEntry* entry = log_.get(applied + 1);
    if (entry == nullptr) break;
    apply_entry(*entry);
    ++applied;
  }
  if (applied != log_.applied() && !log_.set_applied(applied)) {
    core::log("kgroup").error("could not persist applied point group={} seq={}", ref_.target(), applied);
  }
}

void GroupReplica::apply_entry(const proto::KgroupEntry& entry) {
  // Every member applies the same committed log, so these rules give every
  // member the same state. Leaders that crashed mid-migration can leave
  // uncommitted fragments that a later take-over commits: entries after the
  // seal, and inherited state split by another leader's entries. An
  // acknowledged update always follows a complete inherited state and
  // precedes the seal in the committed log, so nothing acknowledged is
  // skipped.
  if (sealed_) return;
  switch (entry.kind()) {
    case proto::KGROUP_SNAPSHOT:
      // Every run carries the same sealed state; after the first complete
      // one, later runs would only undo the updates applied since.
      if (inherited_) return;
      // A run of snapshot entries starting at offset 0 replaces any partial
      // run an earlier leader left behind (it crashed while inheriting).
      if (entry.snapshot_offset() == 0) snapshot_buffer_.clear();
      if (entry.snapshot_offset() != snapshot_buffer_.size()) return;
      snapshot_buffer_ += entry.data();
      if (snapshot_buffer_.size() == entry.snapshot_size()) {
        if (!state_machine_.restore(snapshot_buffer_)) {
          core::log("kgroup").error("inherited state rejected group={} seq={}", ref_.target(), entry.seq());
        }
        snapshot_buffer_.clear();
        inherited_ = true;
      }
      return;
    case proto::KGROUP_SEAL:
      sealed_ = true;
      successor_ = entry.successor();
      final_state_ = state_machine_.snapshot();
      return;
    default:
      if (inherited_) state_machine_.apply(entry.seq(), entry.data());
      return;
  }
}

// ---- migration -------------------------------------------------------------------

void GroupReplica::arm_epoch_timer() {
  if (hooks_.schedule == nullptr || epoch_timer_.active()) return;
  const core::TimePoint end = hooks_.schedule->epoch_end(config_.target, config_.epoch);
  epoch_timer_.start(end - env_.now(), [this] { on_epoch_end(); });
}

void GroupReplica::on_epoch_end() {
  if (!serving()) return;
  const uint64_t next = std::max(config_.epoch + 1, hooks_.schedule->epoch_at(config_.target, env_.now()));
  seal(next, 0);
  // No successor could be selected (no live nodes in view): try again later.
  if (!sealing_) epoch_timer_.start(options_.migration_retry, [this] { on_epoch_end(); });
}

void GroupReplica::seal(uint64_t epoch, uint32_t generation) {
  if (!serving() || !hooks_.select) return;
  const std::vector<core::NodeId> members = hooks_.select(config_.target, epoch);
  if (members.empty()) return;
  proto::KgroupEntry entry;
  entry.set_kind(proto::KGROUP_SEAL);
  auto* successor = entry.mutable_successor();
  *successor->mutable_group() = make_ref(config_.target, epoch, generation);
  for (core::NodeId id : members) successor->add_members(id.value());
  core::log("kgroup").info("sealing group={} epoch={} generation={} successor_epoch={} successor_generation={}",
                           ref_.target(), ref_.epoch(), ref_.generation(), epoch, generation);
  sealing_ = true;
  epoch_timer_.cancel();
  propose(std::move(entry), nullptr);
}

proto::KgroupStart GroupReplica::own_start() const {
  proto::KgroupStart start;
  *start.mutable_group() = ref_;
  for (core::NodeId id : config_.members) start.add_members(id.value());
  if (config_.source) {
    *start.mutable_source() = make_ref(config_.target, config_.source->epoch, config_.source->generation);
    for (core::NodeId id : config_.source->members) start.add_source_members(id.value());
  }
  return start;
}

void GroupReplica::send_start(core::NodeId member, const proto::KgroupStart& start, std::function<void(bool)> done) {
  proto::KgroupBody body;
  *body.mutable_start() = start;
  migration_requests_.request(
      member, encode_body(body),
      [this, done = std::move(done)](const core::RequestResult& result) {
        // Our successor (or we ourselves) already retired there: so are we.
        if (rejected_retired(result)) return;
        done(result.status == core::RequestStatus::ok);
      },
      retrying(options_.prepare_deadline));
}

void GroupReplica::send_starts(bool probe) {
  // Only a committed seal names a successor, so every start names the same one.
  proto::KgroupStart start;
  *start.mutable_group() = successor_.group();
  *start.mutable_members() = successor_.members();
  *start.mutable_source() = ref_;
  for (core::NodeId id : config_.members) start.add_source_members(id.value());
  const uint64_t term = leader_term_;
  bool waiting = false;
  for (uint32_t value : successor_.members()) {
    const core::NodeId member(value);
    if (started_.count(member) != 0) continue;
    waiting = true;
    if (!start_inflight_.insert(member).second) continue;
    send_start(member, start, [this, member, term](bool ok) {
      start_inflight_.erase(member);
      if (ok && role_ == Role::leader && leader_term_ == term) started_.insert(member);
    });
  }
  if (probe && !waiting && !successor_.members().empty() && start_inflight_.empty()) {
    // Everyone started: keep asking one successor member now and then, so
    // that this group learns ("retired") when its decommission was missed
    // (the successor's leader may itself be gone by then).
    const core::NodeId member(successor_.members(static_cast<int>(probe_++ % successor_.members().size())));
    start_inflight_.insert(member);
    send_start(member, start, [this, member](bool) { start_inflight_.erase(member); });
  }
  arm_migration_retry();
}

void GroupReplica::pull_state() {
  if (pulling_ || inheriting_ || !config_.source || config_.source->members.empty()) return;
  const auto& members = config_.source->members;
  const core::NodeId from = members[pull_from_ % members.size()];
  const uint64_t term = leader_term_;
  pulling_ = true;
  if (from == self_) {
    std::optional<proto::KgroupStateReply> reply;
    if (hooks_.local_final_state) {
      if (auto state = hooks_.local_final_state(config_.source->epoch, config_.source->generation)) {
        reply.emplace();
        reply->set_ready(true);
        reply->set_total_size(state->size());
        if (pull_buffer_.size() <= state->size()) reply->set_chunk(state->substr(pull_buffer_.size()));
      }
    }
    on_state_reply(term, std::move(reply));
    return;
  }
  proto::KgroupBody body;
  auto* request = body.mutable_state_request();
  *request->mutable_group() = make_ref(config_.target, config_.source->epoch, config_.source->generation);
  request->set_offset(pull_buffer_.size());
  migration_requests_.request(
      from, encode_body(body),
      [this, term](const core::RequestResult& result) {
        std::optional<proto::KgroupStateReply> reply;
        if (result.status == core::RequestStatus::ok) {
          auto decoded = decode_body(result.response.body);
          if (decoded && decoded->has_state_reply() && decoded->state_reply().ready()) {
            reply = decoded->state_reply();
          }
        }
        on_state_reply(term, std::move(reply));
      },
      retrying(options_.prepare_deadline));
}

void GroupReplica::on_state_reply(uint64_t term, std::optional<proto::KgroupStateReply> reply) {
  if (role_ != Role::leader || leader_term_ != term || !pulling_) return;
  pulling_ = false;
  if (reply && !pull_buffer_.empty() && reply->total_size() != pull_total_) reply.reset();
  if (reply && pull_buffer_.size() + reply->chunk().size() > reply->total_size()) reply.reset();
  if (!reply || (reply->chunk().empty() && pull_buffer_.size() < reply->total_size())) {
    // Not applied the seal yet, down, or answering inconsistently: try the
    // next old member; after a full round, wait a little.
    ++pull_from_;
    if (++pull_misses_ % config_.source->members.size() == 0) {
      arm_migration_retry();
    } else {
      pull_state();
    }
    return;
  }
  pull_total_ = reply->total_size();
  pull_buffer_ += reply->chunk();
  if (pull_buffer_.size() < pull_total_) {
    pull_state();
    return;
  }
  std::string state = std::move(pull_buffer_);
  pull_buffer_.clear();
  inherit(std::move(state));
}

void GroupReplica::inherit(std::string state) {
  // The whole sealed state: commit it as this group's first entries (CoMesh
  // 3.4 step 4, replication to a quorum of the new group). Every final state
  // of the sealed group is the same, so pages from different old members fit.
  inheriting_ = true;
  const uint64_t term = leader_term_;
  const size_t chunk = std::max<size_t>(options_.max_update_bytes, 1);
  size_t offset = 0;
  do {
    proto::KgroupEntry entry;
    entry.set_kind(proto::KGROUP_SNAPSHOT);
    entry.set_snapshot_offset(offset);
    entry.set_snapshot_size(state.size());
    entry.set_data(state.substr(offset, chunk));
    offset += entry.data().size();
    if (!propose(std::move(entry), nullptr)) return;
    if (role_ != Role::leader || leader_term_ != term) return;
  } while (offset < state.size());
}

void GroupReplica::send_decommissions() {
  if (!config_.source) return;
  const proto::KgroupRef source = make_ref(config_.target, config_.source->epoch, config_.source->generation);
  const uint64_t term = leader_term_;
  bool waiting = false;
  for (core::NodeId member : config_.source->members) {
    if (decommissioned_.count(member) != 0) continue;
    waiting = true;
    if (!decommission_inflight_.insert(member).second) continue;
    proto::KgroupBody body;
    *body.mutable_decommission()->mutable_group() = source;
    migration_requests_.request(
        member, encode_body(body),
        [this, member, term](const core::RequestResult& result) {
          decommission_inflight_.erase(member);
          if (role_ != Role::leader || leader_term_ != term) return;
          const bool gone = result.status == core::RequestStatus::rejected &&
                            (result.response.body == "unknown_group" || result.response.body == "retired");
          if (result.status == core::RequestStatus::ok || gone) {
            decommissioned_.insert(member);
          }
        },
        retrying(options_.prepare_deadline));
  }
  if (waiting) arm_migration_retry();
}

void GroupReplica::arm_migration_retry() {
  if (migration_timer_.active()) return;
  migration_timer_.start(options_.migration_retry, [this] {
    if (role_ != Role::leader || recovering_) return;
    if (!inherited_) {
      pull_state();
      return;
    }
    if (config_.source) send_decommissions();
    if (sealed_) send_starts(true);
  });
}

// ---- answering -------------------------------------------------------------------

void GroupReplica::on_request(const core::Message& request, const proto::KgroupBody& body, core::Responder responder) {
  switch (body.kind_case()) {
    case proto::KgroupBody::kElection:
      handle_election(request, std::move(responder));
      return;
    case proto::KgroupBody::kPrepare:
      handle_prepare(request, body.prepare(), std::move(responder));
      return;
    case proto::KgroupBody::kAppend:
      handle_append(request, body.append(), std::move(responder));
      return;
    case proto::KgroupBody::kStateRequest:
      handle_state_request(body.state_request(), std::move(responder));
      return;
    case proto::KgroupBody::kDecommission:
      handle_decommission(std::move(responder));
      return;
    default:
      responder.reject("unexpected_kind");
      return;
  }
}

void GroupReplica::handle_election(const core::Message& request, core::Responder responder) {
  const bool following = lease_held();
  const bool standing = role_ == Role::leader || role_ == Role::electing || role_ == Role::candidate || following ||
                        env_.now() >= not_standing_until_;
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
  for (auto& entry : log_.range(prepare.from_seq(), options_.max_batch_bytes, next, more)) {
    *reply->add_entries() = std::move(entry);
  }
  reply->set_more(more);
  reply->set_next_seq(next);
  responder.respond(encode_body(body));
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
  reply->set_ok(stored);
  reply->set_term(term);
  reply->set_match(synced_);
  responder.respond(encode_body(body));
  if (rank_of(self_) < rank_of(src) && synced_ >= append.commit() && env_.now() >= not_standing_until_ && !sealed_) {
    // We outrank this leader: stop renewing its lease and claim once it lapses.
    preempting_ = true;
    core::log("kgroup").debug("pre-empting group={} leader={} term={}", ref_.target(), src.to_string(), term);
  }
}

void GroupReplica::handle_state_request(const proto::KgroupStateRequest& request, core::Responder responder) {
  proto::KgroupBody body;
  auto* reply = body.mutable_state_reply();
  // Any member that applied the seal holds the final state: all of them
  // applied the same committed prefix.
  if (sealed_ && request.offset() <= final_state_.size()) {
    reply->set_ready(true);
    reply->set_total_size(final_state_.size());
    reply->set_chunk(final_state_.substr(request.offset(), options_.max_batch_bytes));
  }
  responder.respond(encode_body(body));
}

void GroupReplica::handle_decommission(core::Responder responder) {
  proto::KgroupBody body;
  body.mutable_decommission_ack()->set_ok(true);
  responder.respond(encode_body(body));
  if (hooks_.retired) hooks_.retired();
}

}  // namespace mesh::kgroup
