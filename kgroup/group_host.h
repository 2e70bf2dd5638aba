#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/storage.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_replica.h"
#include "kgroup/heartbeat_coalescer.h"
#include "kgroup/replica_metrics.h"
#include "membership/member_view.h"

namespace mesh::kgroup {

// A node's k-group memberships. It owns the kgroup body type on the
// Messenger (which must outlive it), decodes each request once and hands it
// to the replica of the group it names, forwards membership events to every
// replica, starts successor groups when a sealed group's leader says so, and
// drops decommissioned groups. Requests for a group this node does not serve
// are rejected ("unknown_group"), so the asker learns at once. With
// ReplicaOptions::coalesce_heartbeats it ticks the heartbeats of every group
// it leads at once and sends those for one node in one request
// (kgroup/heartbeat_coalescer.h); a request carrying several groups'
// heartbeats is handed out one append per group and answered once.
class GroupHost {
 public:
  // The state machine a new group of `target` hosts.
  using StateMachineFactory = std::function<std::unique_ptr<StateMachine>(const GroupTarget& target)>;
  // The members of `target`'s group in `epoch` from this node's view
  // (GroupSelector::members), priority order.
  using Selector = std::function<std::vector<core::NodeId>(const GroupTarget& target, uint64_t epoch)>;

  GroupHost(core::Env& env, core::Messenger& messenger, core::Storage& storage, membership::MemberView& view,
            core::Metrics& metrics, ReplicaOptions options, StateMachineFactory factory, Selector select = {},
            const EpochSchedule* schedule = nullptr);
  GroupHost(const GroupHost&) = delete;
  GroupHost& operator=(const GroupHost&) = delete;
  ~GroupHost();

  // Re-joins every group whose configuration this node persisted (after a
  // restart). Returns how many.
  size_t restore();
  // Creates and starts this node's replica of `config` (replacing any replica
  // of the same group).
  GroupReplica& join(GroupConfig config);
  // Drops the replica (its persisted state stays unless `erase` is set).
  void leave(const std::string& target, uint64_t epoch, uint32_t generation, bool erase = false);
  GroupReplica* find(const std::string& target, uint64_t epoch, uint32_t generation = 0) const;
  // The most recent group (highest epoch, then generation) of `target` here.
  GroupReplica* latest(const std::string& target) const;
  std::vector<GroupReplica*> replicas() const;

  // Called after a replica is created and before it starts (tests attach
  // observers; the agent could attach its device or routine logic).
  void set_on_join(std::function<void(GroupReplica&)> callback) { on_join_ = std::move(callback); }

 private:
  using Key = std::tuple<std::string, uint64_t, uint32_t>;
  struct Hosted {
    std::unique_ptr<StateMachine> state_machine;
    std::unique_ptr<GroupReplica> replica;
  };

  void on_request(const core::Message& request, core::Responder responder);
  // Hands a decoded request to the replica of the group it names.
  void route(const core::Message& request, const proto::KgroupBody& body, core::Responder responder);
  // Several groups' heartbeats in one request: each routed as if alone, one reply with every answer.
  void on_heartbeats(const core::Message& request, const proto::KgroupHeartbeats& heartbeats,
                     core::Responder responder);
  // One heartbeat round of every group led here, then the coalesced sends.
  void heartbeat_tick();
  void on_start(const core::Message& request, const proto::KgroupStart& start, core::Responder responder);
  void retire(const Key& key);
  // Every group of a target up to the watermark (epoch, generation) has been
  // decommissioned: its successor inherited its state. Persisted, so a
  // retired group is never started again here, and a straggler that missed
  // its decommission learns it ("retired") from any node that did not.
  std::optional<std::pair<uint64_t, uint32_t>> retired_watermark(const std::string& target) const;
  bool is_retired(const std::string& target, uint64_t epoch, uint32_t generation) const;
  ReplicaHooks hooks_for(const GroupConfig& config);

  core::Env& env_;
  core::Messenger& messenger_;
  core::Storage& storage_;
  membership::MemberView& view_;
  ReplicaOptions options_;
  StateMachineFactory factory_;
  Selector select_;
  const EpochSchedule* schedule_;
  membership::MemberView::ListenerHandle listener_ = 0;
  // Declared before groups_: replicas cancel their heartbeats into it as they go.
  std::unique_ptr<HeartbeatCoalescer> heartbeats_;
  core::ScopedTimer heartbeat_timer_;
  std::map<Key, Hosted> groups_;
  std::set<Key> retiring_;
  core::ScopedTimer retire_timer_;
  std::function<void(GroupReplica&)> on_join_;
  ReplicaMetrics replica_metrics_;
  core::Counter& dropped_malformed_;
  core::Counter& dropped_unknown_group_;
  core::Counter& groups_started_;
  core::Counter& groups_retired_;
};

}  // namespace mesh::kgroup
