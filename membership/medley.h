#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "membership/dissemination_queue.h"
#include "membership/hop_distances.h"
#include "membership/local_health.h"
#include "membership/medley_options.h"
#include "membership/member_digest.h"
#include "membership/member_table.h"
#include "membership/member_view.h"
#include "membership/membership_codec.h"
#include "membership/probe_target_selector.h"
#include "proto/membership.pb.h"

namespace mesh::membership {

// Medley: SWIM failure detection and membership for ad-hoc meshes. Each
// protocol period this node pings one member, drawn with probability falling
// with hop distance (hops^-alpha; alpha = 0 is plain SWIM) in Medley's
// time-bounded bag order; without an ack after the probe timeout it asks K
// helpers near the target to ping it; without any ack by the end of the
// period it suspects the target if a helper reported it silent (a nack), or
// after a few such probes in a row if nobody answered at all (over many
// lossy hops that is mostly path loss); beyond silence_radius_hops silence
// counts for nothing and only helpers' nacks suspect a far member, which its
// near neighbours probe far more often anyway. A suspect that does not refute (by raising
// its incarnation) within the suspicion timeout is declared failed. Updates
// travel piggy-backed on pings and acks. Lifeguard's local health, dynamic
// suspicion timeouts and buddy refutation keep a struggling node from
// accusing healthy ones. Joining, push-pull anti-entropy and partition
// merging use a chunked list pull over core's reliable requests; a
// push-pull first compares per-bucket digests of the two lists and sends only
// the members of buckets that differ. Medley's feedback shortens the
// detection tail: a near member not heard from for a while, or suspected by
// another node, is probed (passive), and a node probed too rarely asks its
// near members to probe it more (active).
//
// Sans-IO: time, timers and randomness from the Env; messages through the
// Messenger (body type Envelope.membership), which this object owns the
// membership handlers of.
class Medley final : public MemberView {
 public:
  // One member as `meshctl members` shows it.
  struct MemberStatus {
    Member member;
    std::optional<uint32_t> hops;
    std::optional<core::TimePoint> last_heard;  // last message from the member itself
  };

  Medley(core::Env& env, core::Messenger& messenger, core::Metrics& metrics, const HopDistances& distances,
         MedleyOptions options);
  Medley(const Medley&) = delete;
  Medley& operator=(const Medley&) = delete;
  ~Medley() override;

  // MemberView.
  core::NodeId self() const override { return table_.self(); }
  std::vector<Member> live_members() const override;
  size_t live_count() const override { return table_.live_count(); }
  std::optional<Member> member(core::NodeId id) const override;
  uint64_t version() const override { return version_; }
  ListenerHandle add_listener(Listener listener) override;
  void remove_listener(ListenerHandle handle) override;
  // A push-pull with `peer` at once (deduplicated with any running one).
  void catch_up_from(core::NodeId peer) override;

  // Starts probing, and joins through `contacts` (any nodes already in the
  // mesh, typically one-hop neighbours) unless empty: the first node of a
  // mesh starts alone and the others join it.
  void start(std::vector<core::NodeId> contacts);
  // Replaces the contacts (the agent passes its current one-hop
  // neighbours). A contact that is not a live member is pulled from, one
  // per join_retry while this node knows nobody else, one per
  // reconnect_interval otherwise: that is how a node joins, and how two
  // groups that formed apart (nodes started far apart at once) merge.
  void set_contacts(const std::vector<core::NodeId>& contacts);
  // Graceful leave: announces `left`, stops probing, keeps answering pings
  // (with the `left` record) until destroyed.
  void leave();

  // The metadata slot. False (nothing changes) if the entry would break the
  // size bounds or the key is empty. Each change raises the incarnation.
  bool set_metadata(const std::string& key, const std::string& value);
  bool erase_metadata(const std::string& key);

  // Every member, by id; failed and left ones too if `include_gone`.
  std::vector<MemberStatus> status(bool include_gone) const;
  uint64_t incarnation() const { return table_.self_member().incarnation; }
  uint32_t local_health() const { return health_.score(); }
  bool running() const { return running_; }
  bool has_left() const { return left_; }
  const ProbeTargetSelector& selector() const { return selector_; }

 private:
  struct Probe {
    uint64_t seq = 0;
    core::NodeId target;
    bool acked = false;
    size_t helpers = 0;
    size_t nacks = 0;
  };
  // A ping-req this node runs for another.
  struct Relay {
    core::NodeId requester;
    uint64_t requester_seq = 0;
    core::NodeId target;
    bool nack_due = true;
    std::unique_ptr<core::ScopedTimer> timer;
  };

  void on_datagram(const core::Message& message);
  void on_sync_request(const core::Message& request, core::Responder responder);
  void handle_ping(core::NodeId from, const proto::Ping& ping);
  void handle_ack(core::NodeId from, const proto::Ack& ack);
  void handle_ping_req(core::NodeId from, const proto::PingReq& req);
  void handle_nack(const proto::Nack& nack);

  void tick();
  void start_probe();
  // Passive feedback: the near live member heard from longest ago, if that
  // is over passive_feedback_after (and it was not passive-probed since).
  std::optional<core::NodeId> passive_feedback_target() const;
  // Within passive_feedback_radius_hops, with passive feedback on.
  bool near_for_feedback(core::NodeId id) const;
  // Active feedback: a probe of this node arrived.
  void note_probed(core::NodeId from, uint64_t seq);
  // Active feedback: whether this node is probed too rarely (its moving
  // average gap between probes, with the open gap, over active_feedback_gap).
  bool rarely_probed() const;
  void grant_boost(core::NodeId member);
  void expire_boosts();
  void send_ping(core::NodeId target, uint64_t seq);
  void probe_indirect(uint64_t seq);
  void finish_probe();
  void reconnect();
  void send_reconnect_ping(core::NodeId target);
  void push_pull();
  core::Duration push_pull_interval() const;
  void reap();
  void join_attempt();

  // What a pull asks for: the whole list, or the members of the buckets
  // where the peer's digest differs from ours. Join attempts ask for the
  // whole list: their contact is either not a member yet (a joiner knows
  // nobody, another group shares nothing) or crashed, and a request to a
  // crashed node is retransmitted until its deadline, so it stays small.
  enum class Pull : uint8_t { whole_list, differences };
  // Pulls `peer`'s list chunk by chunk, starting after `after`.
  void sync_from(core::NodeId peer, bool reverse, core::NodeId after, Pull pull);
  MemberDigest digest() const;

  void merge_updates(const google::protobuf::RepeatedPtrField<proto::MemberRecord>& updates);
  void merge(const MemberRecord& record, bool from_sync);
  void about_self(const MemberRecord& record);
  void refute(uint64_t over_incarnation);
  void declare(core::NodeId id, MemberState state);
  void on_suspicion_timer();
  void arm_suspicion_timer();
  core::Duration suspicion_timeout(size_t accusers) const;

  // Updates for a message to `to`: its own record first when we think it is
  // not alive (so it can refute at once), then the queue's.
  void fill_updates(core::NodeId to, google::protobuf::RepeatedPtrField<proto::MemberRecord>* out);
  // What Medley sends: the type label of its traffic series.
  enum class Sent : uint8_t { ping, ping_req, ack, nack, gossip, sync_request, sync_response };
  static constexpr size_t kSentTypes = 7;
  static const char* sent_name(Sent type);
  void send(core::NodeId to, const proto::MembershipBody& body, Sent type);
  void count_sent(core::NodeId to, Sent type, size_t bytes);
  void heard(core::NodeId id) { last_heard_[id] = env_.now(); }
  void emit(MemberEventKind kind, const Member& member);
  void set_self(const Member& self);

  core::Env& env_;
  core::Messenger& messenger_;
  core::Metrics& metrics_;
  const HopDistances& distances_;
  MedleyOptions options_;
  CodecLimits limits_;
  MemberTable table_;
  DisseminationQueue queue_;
  ProbeTargetSelector selector_;
  // The table's live_set_version() when the selector was last handed the
  // live members: every probe period would otherwise copy and sort the
  // whole list only to find it unchanged.
  std::optional<uint64_t> selector_live_set_version_;
  LocalHealth health_;

  bool running_ = false;
  bool left_ = false;
  uint64_t next_seq_ = 1;
  std::optional<Probe> probe_;
  std::map<uint64_t, Relay> relays_;  // by the seq of our ping to the target
  std::map<core::NodeId, core::TimePoint> last_heard_;
  std::vector<core::NodeId> contacts_;
  size_t next_contact_ = 0;
  std::set<core::NodeId> syncing_;       // peers being pulled from
  std::set<core::NodeId> verify_;  // live members to probe next (stale accusations, silent probes)
  std::set<core::NodeId> reconnect_soon_;  // failed members to ping soon (refused revivals)
  std::map<core::NodeId, uint32_t> silent_probes_;  // alive members: silent probes in a row
  uint32_t fast_push_pulls_ = 0;  // push-pulls left at the unscaled interval
  std::map<core::NodeId, core::TimePoint> passive_probed_;  // last passive-feedback probe, by member
  // Active feedback: the last probe of this node, who sent it (a second
  // direct ping of the same probe is not a new probe), and the moving
  // average of the gaps between probes, in microseconds.
  std::optional<core::TimePoint> last_probed_;
  std::pair<core::NodeId, uint64_t> last_probe_of_me_{};
  std::optional<double> probe_gap_average_us_;
  std::map<core::NodeId, core::TimePoint> boosted_until_;  // members that asked to be probed more
  std::set<uint64_t> pending_requests_;  // messenger msg_ids, cancelled on destruction

  std::map<ListenerHandle, Listener> listeners_;
  ListenerHandle next_listener_ = 1;
  uint64_t version_ = 0;

  core::ScopedTimer tick_timer_;
  core::ScopedTimer indirect_timer_;
  core::ScopedTimer suspicion_timer_;
  core::ScopedTimer join_timer_;
  core::ScopedTimer push_pull_timer_;
  core::ScopedTimer reconnect_timer_;
  // Shared with handlers registered on the Messenger, which may outlive us.
  std::shared_ptr<bool> alive_;

  core::Counter& probes_;
  core::Counter& indirect_probes_;
  core::Counter& suspicions_;
  core::Counter& failures_;
  core::Counter& refutations_;
  core::Counter& decode_errors_;
  core::Counter& syncs_;
  core::Counter& digest_matches_;  // sync requests answered with nothing: the lists agreed
  core::Counter& passive_probes_;
  core::Counter& boosts_granted_;
  core::Histogram& message_bytes_;  // membership body bytes per message sent
  // The series of every message sent, by type, and of the records piggy-
  // backed on them, by state (alive, suspect, failed, left), each found on
  // first use: a series lookup by string key per message and per record
  // cost more than the counting.
  struct SentCounters {
    core::Counter* messages = nullptr;
    core::Counter* bytes = nullptr;
    core::Counter* hop_bytes = nullptr;
  };
  std::array<SentCounters, kSentTypes> sent_{};
  struct PiggybackCounters {
    core::Counter* records = nullptr;
    core::Counter* bytes = nullptr;
  };
  std::array<PiggybackCounters, 4> piggyback_{};
};

}  // namespace mesh::membership
