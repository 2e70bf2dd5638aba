#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/env.h"
#include "core/metrics.h"
#include "kgroup/group_client.h"
#include "kgroup/group_host.h"
#include "kgroup/group_selector.h"
#include "routine/catalog.h"
#include "routine/device_watcher.h"
#include "routine/routine_group_state.h"
#include "routine/routine_messages.h"
#include "routine/routine_model.h"

namespace mesh::routine {

struct RoutineLeaderOptions {
  // The mesh's lock strategy; a routine may override it (`lock = "ola"`).
  LockStrategy strategy = LockStrategy::sla;
  // How often this node looks for routine groups it started or stopped leading.
  core::Duration scan_interval = std::chrono::milliseconds(200);
  // While waiting for a lock or a command's outcome, ask its device group
  // this often (the grant itself is committed there before it is read).
  core::Duration poll_interval = std::chrono::milliseconds(200);
  // Held locks are renewed at every member of the device's group this often
  // (DeviceLeaderOptions::lock_reclaim_after is the other side).
  core::Duration renew_interval = std::chrono::seconds(3);
  // One write or read to another group gives up after this (and is retried).
  core::Duration request_timeout = std::chrono::seconds(5);
  // OLA: after a refusal, wait a random time in [backoff_min, backoff_max *
  // 2^(attempt-1)] (capped at backoff_cap) before trying again.
  core::Duration backoff_min = std::chrono::milliseconds(100);
  core::Duration backoff_max = std::chrono::milliseconds(500);
  core::Duration backoff_cap = std::chrono::seconds(5);
  // Env time at the Unix epoch (as DeviceLeaderOptions) and the offset of
  // local time from UTC, for trigger windows and days.
  core::TimePoint clock_origin{};
  int32_t utc_offset_minutes = 0;
};

// The routine leaders of one node (CoMesh 4.2): for every routine group
// ("routine:ID") this node leads, watch the devices its trigger names,
// trigger it, and drive each invocation through its phases:
//
//  - Trigger: on every change of a trigger device (DeviceWatcher) the
//    trigger is evaluated at local time; if it holds, a RoutineTrigger
//    naming the change (device, version) is committed. The group drops it
//    if that change was already acted on or the routine's minimum interval
//    has not passed, so a new leader re-evaluating what its predecessor saw
//    does not trigger twice.
//  - ACQUIRING_LOCKS: the devices of its commands, locked at their device
//    groups. SLA: one at a time in increasing device id, each queued until
//    granted (no wait-for cycle: deadlock-free; the holder of the smallest
//    contended device always progresses). OLA: all at once, each taken only
//    if free; on any refusal every lock is given back and the routine tries
//    again after a randomized, growing backoff. Each grant is committed here
//    (LockHeld, with its fencing token) before the next step.
//  - EXECUTING: commands in order, each a CommandAccept at its device group
//    with id ROUTINE#SEQ#INDEX and the lock's token, then its outcome read
//    back and committed here. A command's duration keeps the locks that long
//    before the next command (or the release).
//  - RELEASING_LOCKS: every lock given back (each release committed by its
//    device group), then the invocation's end committed here.
//
// Everything a leader does follows from the committed state, and every
// request it sends is idempotent (lock requests and releases by holder,
// commands by id), so a new leader simply repeats the step its predecessor
// may or may not have finished. While holding locks the leader renews them
// (LockRenew) at every member of each device's group.
class RoutineLeaders {
 public:
  using EpochOf = std::function<uint64_t(const kgroup::GroupTarget& target)>;

  RoutineLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector, EpochOf epoch_of,
                 const Catalog& catalog, kgroup::GroupClient& client, DeviceWatcher& watcher,
                 RoutineMessages& messages, core::Metrics& metrics, RoutineLeaderOptions options);
  RoutineLeaders(const RoutineLeaders&) = delete;
  RoutineLeaders& operator=(const RoutineLeaders&) = delete;
  ~RoutineLeaders();

  void start();

  // The routines this node leads right now.
  std::vector<std::string> led_routines() const;

 private:
  struct Driving;
  struct Session;
  using SessionKey = std::tuple<std::string, uint64_t, uint32_t>;

  void scan();
  void sync_watch(const SessionKey& key, Session& session);
  void on_device_change(const SessionKey& key, const std::string& device, const DeviceWatcher::Seen& seen);
  void drive(const SessionKey& key);
  void drive_invocation(const SessionKey& key, const RoutineGroupState::Invocation& invocation);
  void acquire_sla(const SessionKey& key, uint64_t seq, const std::string& device);
  void acquire_ola(const SessionKey& key, uint64_t seq, const std::vector<std::string>& missing);
  void give_back(const SessionKey& key, uint64_t seq, std::vector<std::string> devices, core::Duration then_wait);
  void execute(const SessionKey& key, uint64_t seq, uint32_t index, const RoutineCommand& command);
  void poll_command(const SessionKey& key, uint64_t seq, uint32_t index, core::TimePoint deadline);
  void release(const SessionKey& key, uint64_t seq, std::vector<std::string> devices, proto::InvocationEnd end);
  void renew_locks();
  // A write or read at the group of `device`, remembering the leader that
  // answered (lock renewals go there too).
  void write_device(const std::string& device, std::string payload, kgroup::GroupClient::WriteCallback callback);
  void read_device(const std::string& device, std::string query, kgroup::GroupClient::ReadCallback callback);

  // Commits `update` in the session's group; done(committed) runs once.
  using Committed = std::function<void(bool committed)>;
  void submit(const SessionKey& key, const proto::RoutineUpdate& update, Committed done);
  void step(const SessionKey& key, uint64_t seq, const std::function<void(proto::InvocationStep&)>& fill,
            Committed done);
  // Idle again after a step: at once if it was committed, after
  // poll_interval if not.
  void after_step(const SessionKey& key, uint64_t seq, bool committed);
  // Marks the invocation idle again and drives the session after `delay`.
  void idle(const SessionKey& key, uint64_t seq, core::Duration delay = core::Duration::zero());

  Session* session(const SessionKey& key);
  kgroup::GroupReplica* replica(const SessionKey& key) const;
  const RoutineGroupState* state(const SessionKey& key) const;
  const RoutineSpec* spec_of(const SessionKey& key) const;
  // The invocation's lock holder name (holder_name), from the committed state.
  std::string holder_of(const SessionKey& key, uint64_t seq) const;
  LockStrategy strategy_of(const RoutineSpec& spec) const;
  int64_t now_us() const;

  core::Env& env_;
  kgroup::GroupHost& host_;
  const kgroup::GroupSelector& selector_;
  EpochOf epoch_of_;
  const Catalog& catalog_;
  kgroup::GroupClient& client_;
  DeviceWatcher& watcher_;
  RoutineMessages& messages_;
  RoutineLeaderOptions options_;
  core::ScopedTimer scan_timer_;
  core::ScopedTimer renew_timer_;
  std::map<SessionKey, std::unique_ptr<Session>> sessions_;
  std::map<std::string, core::NodeId> device_group_leaders_;  // device group target -> last leader heard
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  core::Counter& triggers_;
  core::Counter& invocations_ok_;
  core::Counter& invocations_failed_;
  core::Counter& lock_retries_;
};

// A digest of the routine's definition: an invocation runs the definition
// it was triggered with, or stops.
uint64_t definition_digest(const RoutineSpec& spec);

}  // namespace mesh::routine
