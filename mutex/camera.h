#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/env.h"
#include "core/expected.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/storage.h"
#include "membership/member_view.h"
#include "mutex/camera_options.h"
#include "mutex/camera_store.h"
#include "mutex/network_size_estimator.h"
#include "mutex/request_id.h"
#include "mutex/slow_path.h"
#include "proto/mutex.pb.h"

namespace mesh::mutex {

// What a holder gets: the resource, its request, and a fencing token that a
// resource can use to reject a stale holder.
struct Grant {
  std::string resource;
  RequestId request;
  uint64_t fencing_token = 0;
  bool slow_path = false;
  core::TimePoint requested_at{};
  core::TimePoint granted_at{};
};

enum class AcquireError {
  timeout,       // not granted before the acquire's timeout
  bad_resource,  // empty name or longer than the limit
};
std::string_view to_string(AcquireError error);

using AcquireResult = core::Expected<Grant, AcquireError>;
using AcquireCallback = std::function<void(const AcquireResult& result)>;
using AcquireHandle = uint64_t;

// Camera (camera.md): churn-tolerant mutual exclusion on named resources,
// one independent instance of the algorithm per resource.
//
// Fast path (Algorithm 2): Ricart-Agrawala over this node's member list,
// where every OK carries the nodes the sender recently OKed, a requester asks
// every node it learns of that way or from an incoming request, and RELEASE
// is flooded on exit to clear those sets. Safe while any two requesters'
// lists intersect (the Mutual Friend Property). Slow path (Algorithm 3): when
// the list holds at most N.upper / 2 nodes, the request travels down a
// spanning tree of the whole mesh and the OKs come back up it.
//
// Partitions: Theorem 9 assumes the tree spans the mesh. In a partitioned
// mesh it spans one island, and every island would grant. Subtree OKs
// therefore count the nodes they carry, and the root grants only when its
// tree covers more than half of the nodes it heard of lately (never fewer
// than the configured floor; at most one island can); otherwise
// it waits and rebuilds the tree every probe_interval until the partition
// heals or the acquire times out.
//
// Failures: a node membership declares failed or left (once a probe
// confirms it: the verdict may be about an earlier life of a node that has
// restarted, and a leaving node answers for its leave grace, so an answer
// from the same life is probed again until it stops), or one outside the
// member list that stops answering, is no longer waited for, its requests
// and deferred OKs are dropped, and tree nodes adopt a failed child's
// children.
//
// Fencing tokens: each node keeps a per-resource high-water mark, raised by
// the marks carried in REQUEST, OK and subtree OK and by the token in
// RELEASE; a holder's token is one above the largest mark it collected. Of
// two holders in turn, the later one either got a deferred OK from the
// earlier, or asked it directly, or heard of it through a common friend's
// recently-OKed set (and then asked it) or from a friend that got its
// RELEASE: in every case it collected a mark at least the earlier token.
// On the slow path the tree is the common friend: it covers a majority, so
// it reaches a node that OKed the earlier holder, and that node either got
// the RELEASE (its mark is at least the token) or still has the holder in
// its recently-OKed set. RELEASE is one flooded datagram and may be lost,
// and membership skipping a node (left or failed) proves nothing: a node
// that leaves answers for its leave grace, so the probe after the verdict
// keeps it. A tree node therefore sends its JOIN to every node in its
// recently-OKed set, gone or not, as the fast path asks the nodes of an OK
// set: the holder's subtree OK brings its own mark, or its silence makes
// the tree node forget it and jump (below). Marks are persisted
// (CameraStore: a reservation block above the mark), so a restarted node
// never falls below a mark it used or showed. A holder
// that crashes may take the only copy of its token with it; nodes that lose
// a node they OKed or were waiting for raise their mark by
// `failed_holder_token_gap`.
//
// Holder lease (camera_hold_lease.cc): the paper's model loses no message
// and stops only failed nodes; a mesh partitions. A holder cut off from the
// rest is silent to it, and every node drops a silent node (its OK, its
// place in the tree, its recently-OKed entry) once retry.deadline passed
// without a word from it, so the other side grants again while the holder
// still believes it holds: two holders, told apart only by their fencing
// tokens. So a holder keeps a lease: every answer to a message it sent at
// time s proves the answering node heard it at s or later, and the grant
// holds while a majority of the nodes it knows (network_size_known, itself
// included) answered something sent within `hold_lease` (the grant itself
// counts as contact at its time). From half the lease on, every quarter
// lease, it probes enough of the nodes it has not heard answer lately to
// keep a majority and a margin fresh, those that answered last first (a
// short hold sends nothing). Once the lease runs out the grant has
// lapsed: held() no longer shows it, for good, though the node keeps the
// resource's state (defers requests) until release(). The other side needs
// a majority to grant (the tree covers one, a fast-path list is more than
// N.upper / 2), so if the holder sits in a minority its lease runs out at
// most `hold_lease` after the cut, and the majority drops it no sooner than
// retry.deadline after the cut: with the default 5 s against 10 s, a
// command sent just before the lapse has 5 s to land. Not covered: a
// holder that still reaches a majority but not one particular requester
// (connectivity that is not transitive, for as long as retry.deadline);
// there the fencing token is what tells the two apart.
//
// Restarts: a restarted node's member list is empty or partial until
// membership has joined it again, and the rest of the mesh may already have
// declared its previous life failed, so nobody would ask it. It therefore
// also asks every node it remembers (persisted ids, treated like nodes
// learned from OK sets: asked, probed, forgotten when silent and unlisted),
// and its N.upper estimate starts from those ids. For `boot_grace` after it
// starts, a node whose list holds nobody else, or not more than half of
// N.upper, lets its requests wait for membership to grow rather than grant
// unasked or build a spanning tree over a membership graph that may still be
// in pieces (Theorem 1); after the grace it proceeds as Algorithms 2 and 3 say.
// Without a configured N.upper floor ([mutex] expected_nodes) a list that
// is more than half of what a booting node has heard of can still be a
// corner of the mesh, disjoint from another node's corner; so within the
// grace a request also waits until the list has stopped growing for
// `boot_settle`. That holds while membership converges within the grace; a
// mesh cut in two since boot, each side never hearing of the other, still
// grants on both sides: only expected_nodes closes that (meshagent warns
// at start when it is not set).
//
// One datagram per OK: when the recently-OKed set would not fit in
// `max_ok_bytes`, the node asks the set's nodes on the requester's behalf
// and sends the OK without the set once they have all OKed the request
// (camera_ok_relay.cc).
//
// Requests for the same resource from this node are served one at a time in
// arrival order. Sans-IO: everything goes through Env, Messenger and the
// MemberView.
class Camera {
 public:
  static constexpr core::Duration kNoTimeout = core::Duration::max();

  // `storage` keeps the fencing reservations and remembered node ids across
  // restarts (the agent's file storage; memory in the simulator).
  Camera(core::Env& env, core::Messenger& messenger, membership::MemberView& members, core::Metrics& metrics,
         core::Storage& storage, CameraOptions options = {});
  Camera(const Camera&) = delete;
  Camera& operator=(const Camera&) = delete;
  ~Camera();

  core::NodeId self() const { return self_; }

  // Asks for `resource`. The callback runs exactly once, with the grant or an
  // error, unless cancel() is called first; it may call acquire, release and
  // cancel. kNoTimeout waits as long as it takes.
  AcquireHandle acquire(const std::string& resource, core::Duration timeout, AcquireCallback callback);
  // Leaves the critical section. False if this node does not hold it.
  bool release(const std::string& resource);
  // Withdraws an acquire that has not been granted (its callback will not
  // run), or releases it if it has. False for an unknown or finished handle.
  bool cancel(AcquireHandle handle);

  std::optional<Grant> held(const std::string& resource) const;

  enum class Phase { idle, waiting, held };
  struct ResourceStatus {
    std::string resource;
    Phase phase = Phase::idle;
    std::optional<RequestId> request;
    bool slow_path = false;
    uint64_t fencing_token = 0;
    size_t awaiting_oks = 0;    // fast-path OKs still missing
    size_t queued_locally = 0;  // acquires behind the current one
    size_t deferred = 0;        // other nodes' requests we hold back
    size_t recently_oked = 0;
    uint64_t high_water = 0;
    bool lapsed = false;  // held, but its holder lease ran out (see above)
  };
  // Every resource this node has state for, sorted by name.
  std::vector<ResourceStatus> status() const;

  // N.upper as the slow-path switch sees it now.
  size_t network_size_upper();
  // Nodes heard of lately (at least the floor): a slow-path grant needs a
  // tree covering more than half of them.
  size_t network_size_known();
  // Nodes learned from requests and OK sets that the member list lacks.
  size_t learned_nodes() const { return learned_.size(); }

 private:
  enum class State { none, wait, held };

  struct Waiter {
    AcquireHandle handle = 0;
    AcquireCallback callback;
    core::TimePoint requested_at{};
    std::shared_ptr<core::ScopedTimer> timer;
  };
  struct Own {
    RequestId id;
    AcquireHandle handle = 0;
    bool slow = false;
    bool parked = false;                         // waiting in boot_grace (dispatch)
    // The largest member list an OK reported, and who reported it: while
    // booting, a list smaller than a peer's is a corner of the mesh.
    uint32_t most_members_reported = 0;
    core::NodeId reported_by;
    bool catching_up = false;  // pulled reported_by's list, re-checks at the grace's end
    std::set<core::NodeId> asked;                // sent our REQUEST
    std::set<core::NodeId> pending;              // OK still missing
    std::map<core::NodeId, uint32_t> ok_nonce;   // which life of each peer OKed us
    std::map<core::NodeId, uint64_t> in_flight;  // messenger msg_id of each REQUEST
    core::TimePoint requested_at{};
  };
  struct Deferred {
    RequestId id;
    std::optional<core::Responder> responder;  // fast path: the OK goes here
    bool slow = false;                         // slow path: the OK goes into the tree
    // The same request relayed to us by friends (camera_ok_relay.cc), by
    // relaying node: their OKs go there too, without our set.
    std::map<core::NodeId, core::Responder> relay_responders;
  };
  // Our OK to `id` whose recently-OKed set does not fit one datagram: we
  // ask that set's nodes (and those their OKs name) for `id` ourselves.
  struct Relay {
    RequestId id;
    std::optional<core::Responder> responder;  // the requester's REQUEST
    std::set<core::NodeId> asked;
    std::set<core::NodeId> pending;  // OK for id still missing
    std::map<core::NodeId, uint64_t> in_flight;
  };
  struct Resource {
    std::string name;
    State state = State::none;
    uint64_t max_seq = 0;
    uint64_t high_water = 0;
    std::optional<Own> own;
    std::optional<Grant> grant;
    std::map<core::NodeId, Deferred> deferred;        // at most one per requester
    std::map<core::NodeId, Relay> relays;             // by requester
    std::map<core::NodeId, RequestId> recently_oked;  // at most one per requester
    std::map<core::NodeId, SlowTree> trees;           // by root: our part in its tree
    std::deque<Waiter> queue;                         // local acquires, the current one first
    // The holder lease ran out (held() found it so): sticky until release,
    // since contact regained says nothing of a grant made meanwhile.
    mutable bool lapsed = false;
  };

  // Plumbing.
  void on_request_message(const core::Message& message, core::Responder responder);
  void on_datagram_message(const core::Message& message);
  void on_member_event(const membership::MemberEvent& event);
  // Every answer is contact for the holder lease (note_answered).
  uint64_t send(core::NodeId dst, const proto::MutexBody& body, std::string_view type,
                std::function<void(const core::RequestResult&)> callback);
  uint64_t send(core::NodeId dst, const proto::MutexBody& body, std::string_view type,
                std::function<void(const core::RequestResult&)> callback, const core::RetryPolicy& retry);
  void later(std::function<void()> action);
  void flood(const proto::MutexBody& body, std::string_view type);
  Resource& resource(const std::string& name);
  Resource* find(const std::string& name);
  std::vector<core::NodeId> member_list();  // live members and learned nodes, self included
  bool is_live_member(core::NodeId id) const;
  bool is_failed(core::NodeId id) const;
  void observe(core::NodeId id);
  // Raises r's high-water mark to at least `mark`, persisted before any
  // message or grant can show it.
  void raise_high_water(Resource& r, uint64_t mark);
  // After a node that may have held r with an unseen token is lost.
  void jump_high_water(Resource& r) { raise_high_water(r, r.high_water + options_.failed_holder_token_gap); }
  uint32_t tree_depth() const { return options_.tolerated_failures + 1; }
  bool camera_mode() const { return options_.algorithm == Algorithm::camera; }

  // Local serialization and the API.
  void start_next(Resource& r);
  void finish_waiter(Resource& r, AcquireHandle handle, const AcquireResult& result);
  void expire(const std::string& name, AcquireHandle handle);

  // Algorithm 2.
  void enter(Resource& r);
  // Asks the list (fast) or starts the tree (slow) for the request enter()
  // made, unless it must wait for membership (boot_grace).
  void dispatch(Resource& r);
  // Resumes requests parked by dispatch() once someone is known or the
  // grace is over.
  void resume_parked();
  void ask(Resource& r, core::NodeId peer);
  void on_request_result(const std::string& name, const RequestId& id, core::NodeId peer,
                         const core::RequestResult& result);
  void on_ok(Resource& r, core::NodeId peer, const proto::MutexOk& ok);
  void check_enter(Resource& r);
  // While booting without an N.upper floor: true (and the list is being
  // pulled) when an OK came from a node that lists more nodes than we do.
  bool behind_a_peer(Resource& r);
  void exit(Resource& r, uint64_t token);
  void abandon(Resource& r);
  proto::MutexBody make_ok(Resource& r, const RequestId& id, bool with_set = true);
  // OKs `id` (already in r.recently_oked): the OK with the set if it fits
  // max_ok_bytes, else through a relay; a relayed request's OK has no set.
  void answer(Resource& r, const RequestId& id, bool relayed, core::Responder responder);
  void send_ok(core::Responder& responder, const std::string& bytes);

  // camera_ok_relay.cc.
  void start_relay(Resource& r, const RequestId& id, core::Responder responder);
  void relay_ask(Resource& r, Relay& relay, core::NodeId peer);
  void on_relay_result(const std::string& name, const RequestId& id, core::NodeId peer,
                       const core::RequestResult& result);
  void finish_relay_if_done(Resource& r, core::NodeId requester);
  // A node is gone: its own relay ends, and no relay waits for it.
  void drop_from_relays(Resource& r, core::NodeId id);
  // An incoming request (fast REQUEST or slow JOIN): learns the requester,
  // updates the sequence number. Returns false if the request is obsolete.
  bool admit(Resource& r, const RequestId& id, uint64_t high_water);
  // Whether our own request has priority over `id` (defer it).
  bool must_defer(const Resource& r, const RequestId& id) const;
  // The deferred entry for `id`, created (replacing an older request of the
  // same node) if needed.
  Deferred& defer(Resource& r, const RequestId& id);
  // `from` is the requester, or a friend relaying its request.
  void handle_request(Resource& r, const proto::MutexRequest& req, core::NodeId from, core::Responder responder);
  void handle_release(Resource& r, const proto::MutexRelease& release);
  void answer_deferred(Resource& r);
  void switch_if_list_shrank(Resource& r);
  // Probes a node membership declares failed or left; forgets it if silent.
  void confirm_gone(core::NodeId id);
  // confirm_gone() again after probe_interval, while membership still says
  // `id` is gone and we keep state with it.
  void recheck_gone_later(core::NodeId id);
  // Whether forgetting `id` would drop anything but its learned entry.
  bool has_state_with(core::NodeId id) const;
  // A message from `id` itself arrived (request, datagram, answer).
  void heard(core::NodeId id) { last_heard_[id] = env_.now(); }
  // forget(id) after a message sent at `since` went unanswered, unless `id`
  // (a new life of it, or the same one) has spoken since: silence that
  // began before a restart says nothing about the new life. False when it
  // spoke: the caller asks again (it may have died just after speaking, and
  // nothing else would ever ask).
  bool forget_if_silent(core::NodeId id, core::TimePoint since);
  // Stops waiting for, and forgets everything of, a node that is gone.
  void forget(core::NodeId id);
  // A message showed `node` living its life `nonce`: what an earlier life
  // of it left behind (requests, an unreleased OK) died with that life.
  void note_life(core::NodeId node, uint32_t nonce);
  // note_life() for the life a probe's or tree message's ack reports.
  void note_ack(core::NodeId node, const core::RequestResult& result);

  // Holder lease (camera_hold_lease.cc).
  void note_answered(core::NodeId peer, core::TimePoint sent_at);
  // Whether r's grant still holds; marks it lapsed (for good) when not.
  bool lease_holds(const Resource& r) const;
  core::TimePoint lease_valid_until(const Resource& r) const;
  // At a grant under `token`: renew_lease() from half the lease on.
  void start_lease(const std::string& name, uint64_t token);
  // While r is held under `token`: probes the known nodes that have not
  // answered lately, then again every hold_lease / 4.
  void renew_lease(const std::string& name, uint64_t token);

  // Algorithm 3.
  void start_tree(Resource& r);
  void send_joins(Resource& r, SlowTree& tree);
  void on_join_result(const std::string& name, core::NodeId root, const RequestId& id, uint32_t attempt,
                      core::NodeId peer, const core::RequestResult& result);
  void handle_join(Resource& r, const core::Message& message, const proto::MutexJoin& join, core::Responder responder);
  void handle_tree(Resource& r, core::NodeId from, const proto::MutexTree& tree);
  void handle_subtree_ok(Resource& r, core::NodeId from, const proto::MutexSubtreeOk& ok);
  void handle_adopt(Resource& r, core::NodeId from, const proto::MutexAdopt& adopt);
  void handle_rebuild(Resource& r, const proto::MutexRebuild& rebuild);
  // Sends what the parent is owed (TREE echo, subtree OK); the root enters.
  void progress_tree(Resource& r, core::NodeId root);
  void rebuild_tree(Resource& r);
  void request_rebuild(Resource& r, const SlowTree& tree);
  // The root's tree is complete but covers no majority of the `known` nodes: no grant;
  // a rebuild after probe_interval reaches what a healed partition adds.
  void await_majority_tree(Resource& r, SlowTree& tree, size_t known);
  SlowTree* tree_for(Resource& r, core::NodeId root, const proto::MutexRequestId& id, uint32_t attempt);
  void tree_member_failed(Resource& r, core::NodeId root, core::NodeId failed);
  // Probes `child` while the tree still waits for it and membership cannot
  // tell us it failed; forgets it when a probe goes unanswered.
  void watch_child(const std::string& name, core::NodeId root, const RequestId& id, uint32_t attempt,
                   core::NodeId child);

  core::Env& env_;
  core::Messenger& messenger_;
  membership::MemberView& members_;
  core::Metrics& metrics_;
  CameraOptions options_;
  core::NodeId self_;
  uint32_t nonce_;
  NetworkSizeEstimator estimator_;
  CameraStore store_;
  core::TimePoint booted_at_;
  // When a node last joined the member list or was learned from a request
  // or an OK set (boot_settle).
  core::TimePoint list_grew_at_;
  membership::MemberView::ListenerHandle listener_ = 0;
  std::shared_ptr<bool> alive_;

  std::map<std::string, Resource> resources_;
  std::set<core::NodeId> learned_;
  std::unordered_map<core::NodeId, uint32_t> lives_;  // latest nonce seen per node
  std::unordered_map<core::NodeId, core::TimePoint> last_heard_;
  std::set<core::NodeId> rechecking_gone_;  // recheck_gone_later() timers running
  // The latest send time of a message of ours that each node answered.
  std::unordered_map<core::NodeId, core::TimePoint> answered_at_;
  std::set<core::NodeId> lease_probing_;  // lease probes in flight
  std::unordered_map<AcquireHandle, std::string> handles_;
  AcquireHandle next_handle_ = 1;

  core::Counter& grants_total_;
  core::Counter& slow_grants_total_;
  core::Counter& timeouts_total_;
  core::Counter& learned_total_;
  core::Counter& rebuilds_total_;
  core::Counter& minority_trees_total_;
  core::Counter& bad_messages_total_;
  core::Counter& relays_total_;
  core::Counter& lapsed_total_;
  core::Histogram& ok_bytes_;
  core::Histogram& wait_ms_;
};

}  // namespace mesh::mutex
