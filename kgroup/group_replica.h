#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/messenger.h"
#include "core/storage.h"
#include "kgroup/bully_election.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_target.h"
#include "kgroup/heartbeat_coalescer.h"
#include "kgroup/outstanding_requests.h"
#include "kgroup/replica_metrics.h"
#include "kgroup/replicated_log.h"
#include "kgroup/state_machine.h"
#include "membership/member_view.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// Timing of one group member; the agent fills it from the configuration.
struct ReplicaOptions {
  // Leader -> followers; each append renews the followers' lease.
  core::Duration heartbeat_interval = std::chrono::milliseconds(100);
  // A follower trusts its leader (and promises nothing to others) this long
  // after an append.
  core::Duration lease = std::chrono::milliseconds(600);
  // The leader stops trusting its quorum lease this much early (clock drift).
  core::Duration lease_margin = std::chrono::milliseconds(50);
  // One append and its retransmissions give up after this; the next
  // heartbeat sends a new one.
  core::Duration append_timeout = std::chrono::milliseconds(150);
  // Bully: how long to wait for higher-priority members to answer.
  core::Duration answer_timeout = std::chrono::milliseconds(300);
  // Bully: how long to wait for a standing higher-priority member to win.
  core::Duration victory_timeout = std::chrono::milliseconds(1500);
  // A claim (and each page of state) gives up after this.
  core::Duration prepare_deadline = std::chrono::milliseconds(1000);
  // After a failed claim wait [b, 2b] (or the lease left, if longer).
  core::Duration election_backoff = std::chrono::milliseconds(100);
  // Migration: how often unanswered start / state / decommission requests are retried.
  core::Duration migration_retry = std::chrono::milliseconds(500);
  // How long past its epoch's end a leader may put off the migration while
  // its state machine finds it unwelcome (StateMachine::
  // migration_unwelcome); zero: never put off.
  core::Duration migration_postpone_max = std::chrono::minutes(30);
  // Heartbeats of every group a node leads leave on one shared tick, and
  // those bound for one node travel in one request (GroupHost,
  // kgroup/heartbeat_coalescer.h). Off: each group ticks on its own.
  bool coalesce_heartbeats = true;
  size_t max_batch_bytes = 900;   // entries per append, per page of a claim
  size_t max_update_bytes = 700;  // larger updates are refused; inherited state is cut to this
  size_t max_queued = 4096;       // submissions waiting for a take-over
  // Log compaction: once this many applied entries are held, the member
  // stores a snapshot of its state machine and removes them. A member then
  // holds at most this many applied entries (plus those not yet applied).
  // 0 never compacts.
  size_t snapshot_after_entries = 512;
};

// The group whose state a group inherits (the sealed predecessor).
struct GroupSource {
  uint64_t epoch = 0;
  uint32_t generation = 0;
  std::vector<core::NodeId> members;
};

// One group: target, epoch, generation (re-selections within the epoch) and
// members in priority order (best score first, self included). Fixed for
// the replica's life: membership changes create a successor group.
struct GroupConfig {
  GroupTarget target;
  uint64_t epoch = 0;
  uint32_t generation = 0;
  std::vector<core::NodeId> members;
  std::optional<GroupSource> source;
};

// What a replica needs from its node besides messages and storage.
struct ReplicaHooks {
  // Epoch boundaries; without one the group never migrates by time.
  const EpochSchedule* schedule = nullptr;
  // The members of `target`'s group in `epoch` from this node's view, in
  // priority order; the sealing leader names them as its successor.
  std::function<std::vector<core::NodeId>(const GroupTarget& target, uint64_t epoch)> select;
  // The successor decommissioned this group: the node drops it (later, not
  // from inside the call) and erases its state.
  std::function<void()> retired;
  // The final state of this node's own replica of a sealed group of the same
  // target, if it has applied the seal (a node does not message itself).
  std::function<std::optional<std::string>(uint64_t epoch, uint32_t generation)> local_final_state;
  // Where the member records its operation latencies; none if null.
  ReplicaMetrics* metrics = nullptr;
  // Set by a host that coalesces heartbeats (GroupHost): the host then calls
  // heartbeat_tick() for every group at once, and this member's heartbeats
  // travel through it. Null: the member ticks on its own timer.
  HeartbeatCoalescer* heartbeats = nullptr;
};

enum class Role { follower, electing, candidate, leader };
std::string_view to_string(Role role);

enum class SubmitStatus {
  committed,      // replicated at a quorum and applied, as sequence number `seq`
  not_leader,     // not accepted: ask `leader` (if known)
  unknown,        // accepted, then leadership was lost before the commit: it may or may not commit
  migrated,       // the group is sealed: submit to its successor
  too_large,      // above ReplicaOptions::max_update_bytes
  storage_error,  // could not be persisted
  overloaded,     // too many submissions queued behind a take-over
};
std::string_view to_string(SubmitStatus status);

struct SubmitResult {
  SubmitStatus status = SubmitStatus::not_leader;
  uint64_t seq = 0;
  core::NodeId leader;
};

// One member of one k-group: the replicated state machine host.
//  - Bully election by priority with terms (CoMesh 3.2): a member whose
//    leader lease ran out, or whose leader membership reports failed, asks
//    the live higher-priority members (BullyElection); if none stands it
//    claims term max(seen) + 1 with a Prepare, and becomes leader once f + 1
//    members (itself counted) promised that term. A member promises each term
//    once, and promises nothing while it holds a live lease from another
//    leader. A member that outranks its leader stops renewing the leader's
//    lease and claims once it lapses (Bully pre-emption), so the best-scored
//    live member ends up leading without two leaders' leases overlapping.
//  - Take-over (Appendix A.1 case 1): promises carry the members' log
//    entries above the claimant's applied prefix (paged, one datagram each).
//    The new leader keeps every entry seen at one or more of them (for a
//    sequence number seen with different terms, the copy of the highest
//    term: an entry committed by a quorum is in every later claim's quorum,
//    and every later copy of it carries the same update), in sequence order
//    up to the first gap, re-replicates them under its own term, and serves
//    new submissions (queued meanwhile) once they are committed.
//  - Quorum replication (CoMesh 3.3): the leader orders updates with sequence
//    numbers, sends them to every member, and commits at f + 1 copies
//    (itself counted). Members persist before acknowledging. Heartbeats are
//    empty appends renewing the followers' lease (scopes-floating-managers:
//    a manager refreshes a lease; its expiry triggers the election); under a
//    GroupHost they leave on the host's tick, coalesced per follower node
//    with the other groups' (kgroup/heartbeat_coalescer.h).
//  - Migration (CoMesh 3.4, Appendix A.1 case 2): at the end of its epoch,
//    or once f members have failed (re-selection, CoMesh 3.5), the leader
//    commits a seal entry naming the successor group; nothing commits after
//    it. Once the seal is committed the leader starts the successor's
//    members; the successor's leader pulls the sealed state from any old
//    member that applied the seal, commits it as its first entries, and then
//    decommissions the old members. Every step is retried by whichever
//    leader holds the step's group, so any of them may crash (cases 2a-2d).
//    A leader puts an epoch's migration off while its state machine says a
//    leader change would cost something (StateMachine::
//    migration_unwelcome), up to migration_postpone_max; clients find the
//    old group meanwhile as they do during any migration.
//  - Damaged storage (ChecksummedStorage reports it; ReplicatedLog::load
//    names what): a member voting with a damaged copy could make a quorum
//    that lacks a committed entry, or promise one term twice. So it discards
//    the group's entries and applied point and rebuilds as a non-voter: it
//    grants no promise, never stands, and tells the leader in every append
//    reply that its copy does not count toward commits or the lease. Once it
//    holds everything up to the leader's last entry (hence every committed
//    one) it votes again, its promise record being intact. A member that lost
//    the promise record itself cannot know which terms it promised, so it
//    stays a non-voter for the group's life (the next epoch's or
//    re-selection's group starts afresh).
//  - Log compaction: every member, once it holds snapshot_after_entries
//    applied entries, stores a snapshot of its state machine (durable first)
//    and removes them. A follower whose next entries its leader compacted,
//    or a candidate whose promiser compacted entries it has not applied,
//    pulls that member's snapshot in datagram-sized chunks (the migration's
//    state request) and continues with the entries after it.
class GroupReplica {
 public:
  using SubmitCallback = std::function<void(const SubmitResult& result)>;
  using ElectedCallback = std::function<void(uint64_t term)>;

  GroupReplica(core::Env& env, core::Messenger& messenger, core::Storage& storage, membership::MemberView& view,
               GroupConfig config, StateMachine& state_machine, ReplicaOptions options, ReplicaHooks hooks = {});
  GroupReplica(const GroupReplica&) = delete;
  GroupReplica& operator=(const GroupReplica&) = delete;
  ~GroupReplica();

  // Loads the persisted state, replays the applied prefix into the state
  // machine, and joins the group's election.
  void start();

  // A kgroup request addressed to this group (GroupHost dispatches).
  void on_request(const core::Message& request, const proto::KgroupBody& body, core::Responder responder);
  void on_member_event(const membership::MemberEvent& event);

  // Orders, replicates and commits `update` if this member leads; the
  // callback runs once (possibly from inside submit()).
  void submit(std::string update, SubmitCallback callback);
  // True at a leader that finished its take-over and holds a quorum lease:
  // its state machine reflects every committed update (linearizable reads).
  bool can_read() const;
  // This leader's quorum lease, less the clock-drift margin, is running:
  // no other member can have been elected (kgroup/leader_read.h).
  bool read_lease_held() const;
  // A leader accepting submissions right now.
  bool serving() const;

  const GroupConfig& config() const { return config_; }
  core::NodeId self() const { return self_; }
  const proto::KgroupRef& ref() const { return ref_; }
  StateMachine& state_machine() { return state_machine_; }
  Role role() const { return role_; }
  bool recovering() const { return role_ == Role::leader && recovering_; }
  uint64_t term() const { return log_.promised_term(); }
  // The leader this member follows (itself when leading); unspecified if none.
  core::NodeId leader() const { return leader_; }
  uint64_t leader_term() const { return leader_term_; }
  uint64_t commit() const { return role_ == Role::leader ? commit_ : log_.applied(); }
  uint64_t applied() const { return log_.applied(); }
  uint64_t last_seq() const { return log_.last_seq(); }
  // Rebuilding damaged state: not voting, promising or counting (see above).
  bool rebuilding() const { return log_.rebuilding() != ReplicatedLog::Damage::none; }
  bool inherited() const { return inherited_; }
  // The seal is applied: the group is read-only and hands over to successor().
  bool sealed() const { return sealed_; }
  const proto::KgroupSuccessor& successor() const { return successor_; }
  // The state at the seal (empty until sealed()).
  const std::string& final_state() const { return final_state_; }
  // The last entry of the log snapshot this member holds (0: none).
  uint64_t snapshot_seq() const { return snapshot_seq_; }

  // One heartbeat round if this member leads; the host's shared tick when
  // ReplicaHooks::heartbeats is set.
  void heartbeat_tick();

  // Called each time this member wins a term (tests check one leader per term).
  void set_on_elected(ElectedCallback callback) { on_elected_ = std::move(callback); }

 private:
  struct FollowerProgress {
    uint64_t next = 1;   // next sequence number to send
    uint64_t match = 0;  // holds every entry up to here as this leader has it
    bool inflight = false;
    core::TimePoint acked_sent{core::TimePoint::min()};  // send time of the latest acknowledged append
    bool voting = true;  // false while the follower rebuilds damaged state: its copy does not count
  };

  size_t rank_of(core::NodeId id) const;
  bool is_member(core::NodeId id) const { return rank_of(id) < config_.members.size(); }
  bool is_live(core::NodeId id) const;
  std::vector<core::NodeId> higher_live_members() const;
  bool lease_held() const;
  // Time until this member may promise a term to `candidate` (zero: now).
  core::Duration promise_wait(core::NodeId candidate) const;
  size_t quorum() const;

  void arm_election_timer(core::Duration delay);
  void on_election_timer();
  void start_election();
  void on_bully_done(bool defer);
  void become_candidate();
  void send_prepare(core::NodeId member, uint64_t from_seq);
  void on_prepare_result(core::NodeId member, uint64_t term, const core::RequestResult& result);
  void note_refusal(core::NodeId member, core::Duration retry_after, bool silent);
  void abandon_candidacy(core::Duration retry_after);
  void merge(const proto::KgroupEntry& entry);
  void become_leader();
  void step_down(core::Duration wait);

  void on_heartbeat();
  bool quorum_lease_valid(core::TimePoint at, core::Duration slack) const;
  void send_append(core::NodeId member);
  void on_append_result(core::NodeId member, uint64_t term, core::TimePoint sent, const core::RequestResult& result);
  void advance_commit();
  // Leader housekeeping once entries commit: finish the take-over, inherit,
  // serve queued submissions, seal, start the successor, decommission.
  void progress_leadership();
  bool propose(proto::KgroupEntry entry, SubmitCallback callback);
  // Applies log entries up to `upto` (never beyond what is held) and
  // persists the applied point.
  void apply_up_to(uint64_t upto);
  void apply_entry(const proto::KgroupEntry& entry);

  // Migration.
  void maybe_reselect();
  void arm_epoch_timer();
  void on_epoch_end();
  void seal(uint64_t epoch, uint32_t generation);
  void pull_state();
  void on_state_reply(uint64_t term, std::optional<proto::KgroupStateReply> reply);
  void inherit(std::string state);
  // probe: also ask one already started member (from the retry timer only).
  void send_starts(bool probe);
  void send_start(core::NodeId member, const proto::KgroupStart& start, std::function<void(bool ok)> done);
  proto::KgroupStart own_start() const;
  void send_decommissions();
  void arm_migration_retry();
  static bool rejected_unknown_group(const core::RequestResult& result);
  // True (and the group retires) if the answer says the group was decommissioned.
  bool rejected_retired(const core::RequestResult& result);

  void handle_election(const core::Message& request, core::Responder responder);
  void handle_prepare(const core::Message& request, const proto::KgroupPrepare& prepare, core::Responder responder);
  void handle_append(const core::Message& request, const proto::KgroupAppend& append, core::Responder responder);
  void handle_state_request(const proto::KgroupStateRequest& request, core::Responder responder);
  void handle_decommission(core::Responder responder);

  // Log compaction (group_replica_compaction.cc).
  // At start: restores the stored snapshot into the state machine; returns
  // the sequence number replay continues after (0 if none).
  uint64_t restore_snapshot();
  // Snapshots the state machine and compacts the log once enough applied
  // entries are held.
  void maybe_compact();
  // Fetches `from`'s log snapshot (at least `seq`), chunked, and installs it.
  void pull_snapshot(core::NodeId from, uint64_t seq);
  void request_snapshot_chunk();
  void on_snapshot_chunk(const core::RequestResult& result);
  // Installs a received snapshot ahead of the applied point. True if the
  // member has applied through it now (or already had); false if it is
  // damaged or could not be persisted.
  bool install_snapshot(std::string_view bytes);
  // A candidate: the members whose promise waited for a snapshot are asked again.
  void after_snapshot_pull(bool installed);
  void handle_snapshot_request(const proto::KgroupStateRequest& request, core::Responder responder);

  core::Env& env_;
  membership::MemberView& view_;
  GroupConfig config_;
  proto::KgroupRef ref_;
  StateMachine& state_machine_;
  ReplicaOptions options_;
  ReplicaHooks hooks_;
  core::NodeId self_;
  ReplicatedLog log_;

  Role role_ = Role::follower;
  core::NodeId leader_;
  uint64_t leader_term_ = 0;
  uint64_t highest_seen_term_ = 0;
  core::TimePoint lease_until_{core::TimePoint::min()};
  core::TimePoint not_standing_until_{core::TimePoint::min()};
  // A restarted member may have acknowledged heartbeats just before its
  // crash that a leader still counts in its quorum lease: it promises
  // nothing, to itself or others, until a lease has passed.
  core::TimePoint no_promise_until_{core::TimePoint::min()};
  // Following a lower-priority leader: refuse its appends until our lease on
  // it lapses, then claim.
  bool preempting_ = false;
  // Latency bookkeeping (ReplicaMetrics), never read by the protocol.
  // The election this member is in since it last followed a leader, if any.
  std::optional<core::TimePoint> election_started_;
  ElectionTrigger election_trigger_ = ElectionTrigger::first;
  // The last append accepted from a leader, or this member's own step-down.
  std::optional<core::TimePoint> leader_contact_;
  // A successor member started without state: the state transfer begins.
  std::optional<core::TimePoint> started_empty_;
  std::optional<core::TimePoint> pull_started_;
  core::TimePoint seal_proposed_{};
  // Follower: entries up to synced_ came from the leader of synced_term_ (or were applied).
  uint64_t synced_ = 0;
  uint64_t synced_term_ = 0;

  // Log compaction: the snapshot this member holds, and the one before it
  // (encoded), so a transfer that began before the latest compaction can finish.
  uint64_t snapshot_seq_ = 0;
  std::string snapshot_bytes_;
  uint64_t previous_snapshot_seq_ = 0;
  std::string previous_snapshot_bytes_;
  struct SnapshotPull {
    core::NodeId from;
    uint64_t seq = 0;  // 0 until the first chunk names it
    std::string buffer;
  };
  std::optional<SnapshotPull> snapshot_pull_;  // under way while set
  // Candidate: granting members whose compacted entries it lacks.
  std::set<core::NodeId> awaiting_snapshot_;

  // Applied state beyond the state machine.
  bool inherited_ = true;        // no source, or its state was applied
  std::string snapshot_buffer_;  // inherited state being applied
  bool sealed_ = false;
  proto::KgroupSuccessor successor_;
  std::string final_state_;  // the state at the seal, served to the successor

  // Candidate.
  uint64_t candidate_term_ = 0;
  std::set<core::NodeId> gathered_;  // promised and sent every page (self included)
  std::set<core::NodeId> refused_;
  bool refusal_was_silent_ = true;
  core::Duration retry_after_{};
  std::map<uint64_t, proto::KgroupEntry> merged_;

  // Leader.
  bool recovering_ = false;
  uint64_t recovery_target_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t commit_ = 0;
  core::TimePoint leader_since_{};
  std::map<core::NodeId, FollowerProgress> progress_;
  struct Pending {
    SubmitCallback callback;
    core::TimePoint proposed;
  };
  std::map<uint64_t, Pending> pending_;
  std::deque<std::pair<std::string, SubmitCallback>> queued_;
  bool draining_ = false;
  bool progress_again_ = false;
  bool sealing_ = false;
  bool migration_postponed_ = false;  // logged once per epoch end
  // A member joined or came back since the last heartbeat round: the round
  // checks whether an undersized group can now hand over (maybe_reselect).
  bool view_grew_ = false;
  bool pulling_ = false;
  bool inheriting_ = false;  // the pulled state is proposed, not yet applied
  size_t pull_from_ = 0;     // index into the source members
  size_t pull_misses_ = 0;
  std::string pull_buffer_;
  uint64_t pull_total_ = 0;
  std::set<core::NodeId> started_;         // successor members that acknowledged the start
  std::set<core::NodeId> decommissioned_;  // source members that dropped the old group
  std::set<core::NodeId> start_inflight_;
  uint64_t probe_ = 0;  // round robin over successor members once all started
  std::set<core::NodeId> decommission_inflight_;

  BullyElection bully_;
  OutstandingRequests election_requests_;
  OutstandingRequests leader_requests_;
  OutstandingRequests migration_requests_;
  OutstandingRequests snapshot_requests_;
  core::ScopedTimer election_timer_;
  core::ScopedTimer heartbeat_timer_;
  core::ScopedTimer epoch_timer_;
  core::ScopedTimer migration_timer_;
  ElectedCallback on_elected_;
};

}  // namespace mesh::kgroup
