#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/expected.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/persisted_node_set.h"
#include "core/storage.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_client.h"
#include "kgroup/group_host.h"
#include "kgroup/group_selector.h"
#include "membership/member_view.h"
#include "proto/kgroup_client.pb.h"
#include "proto/wire.pb.h"

namespace mesh::agent {

// The k-group settings of one node (TOML [kgroup], agent/config.h).
struct KgroupConfig {
  kgroup::SelectionOptions selection;
  kgroup::ReplicaOptions replica;
  // Every group migrates once per epoch, each at its own offset.
  core::Duration epoch_length = std::chrono::hours(1);
  // Env time at which epoch 0 began. Nodes must agree on it: the agent
  // runtime puts it at the Unix epoch on the system clock (so it is as good
  // as the nodes' clock synchronisation); the simulator leaves it at 0.
  core::TimePoint epoch_origin{};
  // A client write gives up (unacknowledged) after this.
  core::Duration write_timeout = std::chrono::seconds(10);
  // Wait before asking again while a group elects, takes over or is created.
  core::Duration write_retry = std::chrono::milliseconds(200);
  // One forwarded write (or genesis probe) waits this long for its answer
  // before the next member is tried.
  core::Duration write_attempt_timeout = std::chrono::seconds(3);
  // A node creates no group until it has run this long, and until this
  // long has passed since a member last joined its view (new, or back from failed):
  // the view is still filling (booting meshes, Medley's join push-pull),
  // and a creator that misses the target's existing group forks it.
  core::Duration genesis_settle = std::chrono::seconds(5);
  // Members seen failing this recently still count for genesis's majority:
  // a node that sees fewer than half of its live and recently failed
  // members live is likely cut off from the rest, where the target's group
  // may be, and creates none. When enough of them to hold a group's quorum
  // failed, genesis also probes them and waits while they stay silent.
  core::Duration genesis_failed_memory = std::chrono::minutes(10);
  // Longest text meshctl kgroup-write accepts (bytes).
  size_t max_text_bytes = 512;
};

// Body type of the agent-to-agent client messages: Envelope.kgroup_client.
inline constexpr uint32_t kKgroupClientBodyType = proto::Envelope::kKgroupClientFieldNumber;

// The agent's k-groups: zero-message selection over the node's membership
// view, the GroupHost holding this node's replicas (each hosting a TextLog),
// the epoch schedule, and client writes.
//
// A client write is accepted by any agent, which drives it to the target's
// leader: it asks the preferred leader of the group it computes (or the
// leader a member named), follows redirects, waits and asks again while an
// election, take-over or creation is in progress, and tries the next member
// after a timeout, all until write_timeout. It reports success only once
// the leader committed the write at f + 1 members. A write carries an id,
// so asking again after an unknown outcome does not append it twice.
//
// Genesis: a target's first group comes into existence on its first write.
// The node that receives a write for a target it hosts no group of, and
// that is the preferred leader of the group its own view computes, first
// asks every live node of its view whether it hosts a group of the target
// (one may exist from an earlier epoch that has not migrated yet, or from a
// different view: then the write goes to that group's leader). Only if
// every one of them answers "none" does it join the new group (epoch from
// the schedule, generation 0, no predecessor) and tell the other members to
// join it too; a node that does not answer postpones genesis until it does
// or membership declares it failed. Two nodes creating the same group at
// once (views that disagree on the preferred leader) find each other through
// their probes, and the one with the higher id steps back: a creator probed
// by a lower id yields to it, and one told by a probe's answer that a lower
// id is creating yields too. From then on the group elects, replicates and
// migrates on its own (GroupReplica).
//
// The probes only find groups on nodes the creator's view lists, so a
// creator whose view is incomplete (just booted or restarted, still
// joining) could miss the target's group and fork it. Two guards: no
// genesis in a node's first genesis_settle nor within genesis_settle of a
// member joining its view, and every probe's answer says
// how many live members the answering node knows; if any knows more than
// the creator, the creator's view is behind: genesis waits, and membership
// pulls that node's list at once (MemberView::catch_up_from). A node that sees only a minority of the members it knew
// lately (live ones plus those failed within genesis_failed_memory) creates
// nothing either: it is probably on the small side of a partition. A node
// on the large side may still miss a group whose members are all on the
// small side, listed failed in its view yet committing there: when the
// target's group, selected among the live members and those failed lately
// at the epoch they were cut off, had a quorum (k / 2 + 1) among the
// failed ones, these are probed too, and genesis waits while that many stay
// silent, until they answer or genesis_failed_memory forgets them (so such
// a target gets no group for that long after such a loss). What
// remains possible: creators whose views are equally large
// but disjoint where it matters (neither lists the other, nor the other's
// members), a group on nodes the creator never saw or forgot (failed
// longer than genesis_failed_memory), or a group on fewer nodes than a
// quorum of k (a one-member group born in a lone node's view), are not
// found, and a second group of the target is created.
class KgroupService : public kgroup::GroupClient {
 public:
  struct WriteResult {
    uint64_t seq = 0;  // position in the target's text log
    core::NodeId leader;
    uint64_t epoch = 0;
    uint32_t generation = 0;
    uint32_t attempts = 0;
  };
  using WriteCallback = std::function<void(const core::Expected<WriteResult, std::string>& result)>;
  struct ReadResult {
    std::string answer;
    core::NodeId leader;      // the leader that answered, in
    uint64_t term = 0;        // this term,
    uint64_t read_index = 0;  // having applied its commit point up to here
    uint64_t epoch = 0;
    uint32_t generation = 0;
  };
  using ReadCallback = std::function<void(const core::Expected<ReadResult, std::string>& result)>;
  // The state machine each group hosts, by target; every one must be a
  // kgroup::ClientStateMachine. Empty: a TextLog for every target.
  using StateMachineFactory = kgroup::GroupHost::StateMachineFactory;

  KgroupService(core::Env& env, core::Messenger& messenger, core::Storage& storage, membership::MemberView& view,
                core::Metrics& metrics, KgroupConfig config, StateMachineFactory factory = {});
  KgroupService(const KgroupService&) = delete;
  KgroupService& operator=(const KgroupService&) = delete;
  ~KgroupService();

  // Appends `text` to `target`'s log; the callback runs once. A timeout of
  // zero means config().write_timeout.
  void write(const kgroup::GroupTarget& target, std::string text, core::Duration timeout, WriteCallback callback);
  // Asks `target`'s leader to answer `query` from its state machine
  // (ClientStateMachine::read) once kgroup::admit_read lets it: a
  // linearizable read. Routed like a write (redirects, retries) but never
  // creates a group: with no group of the target, the preferred leader
  // answers "no group". The callback runs once.
  void read(const kgroup::GroupTarget& target, std::string query, core::Duration timeout, ReadCallback callback);

  // kgroup::GroupClient, for protocol code above the groups: a write of any
  // payload that fits one update (max_update_bytes), and read().
  void write_to(const kgroup::GroupTarget& target, std::string payload, core::Duration timeout,
                kgroup::GroupClient::WriteCallback callback) override;
  void read_from(const kgroup::GroupTarget& target, std::string query, core::Duration timeout,
                 kgroup::GroupClient::ReadCallback callback) override;

  // The group of `target` in the current epoch, from this node's view alone.
  kgroup::GroupSelector::Selected select(const kgroup::GroupTarget& target) const;
  uint64_t current_epoch(const kgroup::GroupTarget& target) const;

  const kgroup::GroupSelector& selector() const { return selector_; }
  // The catalog's devices, for clusters and LSH centres (GroupSelector).
  void set_devices(std::vector<kgroup::DeviceLocation> devices) { selector_.set_devices(std::move(devices)); }
  kgroup::GroupHost& host() { return *host_; }
  const kgroup::GroupHost& host() const { return *host_; }
  const KgroupConfig& config() const { return config_; }
  core::Env& env() const { return env_; }
  size_t writes_in_flight() const { return writes_.size(); }

 private:
  struct Write;
  using Reply = std::function<void(const proto::KgroupClientReply& reply)>;

  void on_request(const core::Message& request, core::Responder responder);
  // A write addressed to this node, from a client here or another agent.
  void serve_write(const kgroup::GroupTarget& target, uint64_t write_id, std::string text, Reply reply);
  void serve_read(const kgroup::GroupTarget& target, const std::string& query, Reply reply);
  // The replica that should answer for `target`, or the reply that says
  // where to go instead (redirect, retry, or "no group" for reads).
  kgroup::GroupReplica* route(const kgroup::GroupTarget& target, bool create, Reply& reply);
  void start_write(const kgroup::GroupTarget& target, std::string payload, core::Duration timeout,
                   WriteCallback callback);
  void start(std::unique_ptr<Write> write);
  void serve_create(const core::Message& request, const proto::KgroupClientCreate& create, core::Responder responder);
  // Probes every live node for a group of `target` and creates it if none
  // has one and `create`; a search for a read (create false) only learns
  // where the group is (a hint) or that there is none.
  // The members failed lately, if a quorum of the target's group could have
  // been among them when they were cut off; none otherwise.
  std::vector<core::NodeId> failed_members_that_could_hold(const kgroup::GroupTarget& target) const;
  void start_genesis(const kgroup::GroupTarget& target, const kgroup::GroupSelector::Selected& selected,
                     bool create = true);
  void finish_genesis(const std::string& target);
  // Why this node must not create a group now (settling, or a minority), or nothing.
  std::optional<std::string> genesis_refusal();
  // Another node is creating the same target's group and has the lower id:
  // stop ours and send writes there.
  void yield_genesis(const std::string& target, core::NodeId creator);

  void attempt(uint64_t id);
  void retry_later(uint64_t id, std::string problem);
  void on_reply(uint64_t id, core::NodeId from, const proto::KgroupClientReply& reply);
  void finish(uint64_t id, const core::Expected<WriteResult, std::string>& result);
  void finish_read(uint64_t id, const core::Expected<ReadResult, std::string>& result);

  core::Env& env_;
  core::Messenger& messenger_;
  membership::MemberView& view_;
  KgroupConfig config_;
  kgroup::GroupSelector selector_;
  kgroup::EpochSchedule schedule_;
  std::unique_ptr<kgroup::GroupHost> host_;

  std::map<uint64_t, std::unique_ptr<Write>> writes_;
  uint64_t next_write_ = 1;

  struct Genesis {
    uint64_t epoch = 0;
    std::vector<core::NodeId> members;
    size_t awaiting = 0;  // probes not answered yet
    size_t silent = 0;    // probes to live members that got no usable answer
    size_t failed_silent = 0;     // the same, to members failed lately
    core::NodeId silent_example;  // one of them, for the log
    // The most live members an answer said its node knows, when above ours,
    // and that node.
    size_t view_behind = 0;
    core::NodeId knows_more;
    std::optional<core::NodeId> hosted_at;
    // False while only reads asked: find the group, never create it.
    bool create = true;
  };
  std::map<std::string, Genesis> genesis_;
  // A read-only search found no group of the target anywhere: reads fail
  // at once until then.
  std::map<std::string, core::TimePoint> absent_until_;
  // Why the target's last genesis waited, for the writer's retry answer.
  std::map<std::string, std::string> genesis_postponed_because_;
  // A probe found the target's group elsewhere: send writes there for a while.
  struct Hint {
    core::NodeId node;
    core::TimePoint until;
  };
  std::map<std::string, Hint> hints_;

  core::Counter& writes_committed_;
  core::Counter& writes_failed_;
  core::Counter& groups_created_;
  core::Counter& genesis_postponed_;
  // Accepted -> acknowledged (committed at f + 1), at the agent the client asked.
  core::Histogram& write_latency_ms_;
  // When this node started, or a member last joined its view.
  core::TimePoint view_grew_;
  // Members this node saw fail, and when (forgotten after
  // genesis_failed_memory, or when they come back or leave). A restart
  // counts every member of peers_ as failed at boot until it is live again:
  // without that, a node restarted into a minority partition sees a
  // majority of the little it knows and creates groups the rest of the mesh
  // already has.
  std::map<core::NodeId, core::TimePoint> failed_at_;
  // The members seen live ("kgroup/peers"), across restarts; dropped when
  // they leave or stay failed for genesis_failed_memory.
  core::PersistedNodeSet peers_;
  membership::MemberView::ListenerHandle member_listener_ = 0;
};

}  // namespace mesh::agent
