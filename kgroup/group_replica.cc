// A member's life: construction, priorities and liveness from membership,
// start-up from storage, request dispatch, and applying the committed log to
// the state machine. Elections and take-over are in
// group_replica_election.cc, leading and quorum replication in
// group_replica_replication.cc, epoch migration in group_replica_migration.cc.
#include "kgroup/group_replica.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/hash_selection.h"
#include "kgroup/replica_requests.h"

namespace mesh::kgroup {

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
      snapshot_requests_(messenger),
      election_timer_(env),
      heartbeat_timer_(env),
      epoch_timer_(env),
      migration_timer_(env) {}

GroupReplica::~GroupReplica() = default;

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
  if (event.kind == membership::MemberEventKind::joined || event.kind == membership::MemberEventKind::recovered) {
    // A group born undersized (genesis on a node whose view held only itself
    // or a few nodes, as while a mesh boots) must hand over as soon as the
    // view can give it k members, not at its next commit: a group that gets
    // no write meanwhile stays on one node, and that node's crash alone then
    // loses its acknowledged writes, and once membership declares the node
    // failed, genesis elsewhere finds no group of the target and creates a
    // second one. Checked at the next heartbeat round rather than here: a
    // sync brings many members one event at a time, and the first event's
    // selection would hand over to a group still short of k.
    view_grew_ = true;
    return;
  }
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

void GroupReplica::start() {
  if (const ReplicatedLog::Damage damage = log_.load(); damage != ReplicatedLog::Damage::none) {
    core::log("kgroup").error(
        "group state damaged; discarding it and rebuilding from the group as a non-voter group={} epoch={} "
        "generation={} promise_lost={}",
        ref_.target(), ref_.epoch(), ref_.generation(), damage == ReplicatedLog::Damage::promise);
    if (!log_.begin_rebuild(damage)) {
      core::log("kgroup").error("could not persist the rebuild of group={} epoch={}; not voting in this life",
                                ref_.target(), ref_.epoch());
    }
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
  // Rebuild the state machine from the snapshot and the applied entries
  // after it: applied entries are committed, so every copy of them is the
  // committed one.
  const uint64_t restored = restore_snapshot();
  const uint64_t applied = std::max(log_.applied(), restored);
  uint64_t replayed = restored;
  for (uint64_t seq = restored + 1; seq <= applied; ++seq) {
    const proto::KgroupEntry* entry = log_.get(seq);
    if (entry == nullptr) break;
    apply_entry(*entry);
    replayed = seq;
  }
  if (replayed != applied) log_.set_applied(replayed);
  synced_ = replayed;
  if (config_.source && log_.promised_term() == 0 && log_.last_seq() == 0) started_empty_ = env_.now();
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
  maybe_compact();
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
        // A leader applies at commit: the inherited state is now at a quorum.
        if (role_ == Role::leader && inheriting_ && hooks_.metrics != nullptr) {
          if (started_empty_) hooks_.metrics->state_transfer(env_.now() - *started_empty_);
          if (pull_started_) hooks_.metrics->state_pull(env_.now() - *pull_started_);
        }
      }
      return;
    case proto::KGROUP_SEAL:
      if (role_ == Role::leader && sealing_ && hooks_.metrics != nullptr) {
        hooks_.metrics->seal_commit(env_.now() - seal_proposed_);
      }
      sealed_ = true;
      successor_ = entry.successor();
      final_state_ = state_machine_.snapshot();
      return;
    default:
      if (inherited_) state_machine_.apply(entry.seq(), entry.data());
      return;
  }
}

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
      if (body.state_request().compacted()) {
        handle_snapshot_request(body.state_request(), std::move(responder));
      } else {
        handle_state_request(body.state_request(), std::move(responder));
      }
      return;
    case proto::KgroupBody::kDecommission:
      handle_decommission(std::move(responder));
      return;
    default:
      responder.reject("unexpected_kind");
      return;
  }
}

}  // namespace mesh::kgroup
