#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/env.h"
#include "core/metrics.h"
#include "kgroup/group_client.h"
#include "kgroup/group_host.h"
#include "kgroup/group_selector.h"
#include "routine/catalog.h"
#include "routine/device_driver.h"
#include "routine/device_group_state.h"
#include "routine/routine_messages.h"

namespace mesh::routine {

struct DeviceLeaderOptions {
  // Pull drivers are read this often (CoMesh 4.1 pings every second).
  core::Duration poll_interval = std::chrono::milliseconds(1000);
  // Consecutive failed reads before a device is declared down (a driver
  // fails a read only after its own timeout, so this is "no answer within
  // down_after_failures timeouts").
  uint32_t down_after_failures = 2;
  // How often this node looks for groups it has started or stopped leading.
  core::Duration scan_interval = std::chrono::milliseconds(200);
  // A subscription lapses unless renewed within this.
  core::Duration subscription_lease = std::chrono::seconds(10);
  // A held lock whose holder has not renewed it (LockRenew) for this long is
  // taken back, unless its routine's group, asked then, still runs the
  // invocation: the lock is lost only when that group is gone or cut off. Routine
  // leaders renew every few seconds; a new device leader counts from its
  // take-over, so a fail-over never shortens a holder's time.
  core::Duration lock_reclaim_after = std::chrono::seconds(30);
  // Env time at the Unix epoch: changes are stamped in microseconds since it
  // (the agent sets it from the system clock, the simulator leaves it at 0),
  // so every node reads a change's time alike.
  core::TimePoint clock_origin{};
  // Handoff of a device that moved here from another group: a step that
  // failed (no leader there yet, a lost message) is tried again after
  // handoff_retry, each request waits handoff_request_timeout, and after
  // handoff_timeout the device starts fresh here (logged): its old group
  // could not be reached, so waiting longer would only keep it unwatched.
  core::Duration handoff_retry = std::chrono::seconds(1);
  core::Duration handoff_request_timeout = std::chrono::seconds(5);
  core::Duration handoff_timeout = std::chrono::seconds(60);
  // An old group that answers "no group" is skipped only if it still does
  // this much later: longer than KgroupService caches that answer
  // (KgroupConfig::write_attempt_timeout), so a group created meanwhile
  // elsewhere is found.
  core::Duration handoff_absent_wait = std::chrono::seconds(5);
  // APEX §7.3, actuation failures: a command its driver reports done is
  // finished ok only once the device shows the values it set (in the
  // driver's reply, or in a read every actuation_check_interval after it).
  // While the commanded attributes keep changing (a curtain on its way) the
  // wait goes on; after actuation_stall with no change it fails
  // (COMMAND_NOT_EFFECTIVE), and a must command's routine rolls back. Zero
  // stall: the driver's report is trusted.
  core::Duration actuation_check_interval = std::chrono::milliseconds(250);
  core::Duration actuation_stall = std::chrono::seconds(5);
  // Largest update payload a group commits (ReplicaOptions::max_update_bytes
  // less the 8-byte write id): imports are cut to it.
  size_t max_update_bytes = 692;
};

// The device leaders of one node (CoMesh 4.1): for every device group
// ("cluster:ID") this node leads, with its quorum lease, watch the group's
// devices through their drivers and run their commands.
//
//  - Watching: pull drivers are read every poll_interval, push drivers also
//    report on their own. A reading that differs from the replicated state,
//    and a device going down (down_after_failures failed reads) or coming
//    back, is committed to the group (DeviceObserved) before anyone is
//    told, so a new leader starts from what subscribers last heard.
//  - Commands: each accepted command, in acceptance order and one at a time
//    per device, is refused (device down), or marked actuating (committed),
//    actuated through the driver, and its outcome committed. A command found
//    actuating by a new leader may have been applied: it is reported
//    interrupted, never actuated twice. The leader actuates only while it
//    holds its quorum lease, so a deposed leader cannot.
//  - Notifications: every member of a device's group remembers who
//    subscribed (DeviceSubscribe, a soft lease the subscriber renews at all
//    members), so a new leader knows its subscribers at once; the leader
//    sends each committed change (DeviceNotify, with the version) to them,
//    its devices' whole state when it takes over, and the current state of
//    the renewed devices in answer to every renewal (a dozen per datagram).
//    A subscriber that missed a notification converges on the next one or
//    on its next renewal.
//  - Locks: requests and releases are writes to the group, granted at apply
//    (DeviceLocks). Holders renew their locks to every member; a lock not
//    renewed within lock_reclaim_after is released by the leader
//    (reclaimed), and the fencing token keeps the old holder from
//    actuating afterwards. A renewal of a lock the group no longer holds
//    for that holder and token is answered (LocksLost), so the holder
//    stops before its next command instead of learning it from a refusal.
//  - Handoff: a device that a catalog change moved into a group this node
//    leads is not polled, actuated or announced until the group holds its
//    record (DeviceGroupState explains why this is safe). The leader
//    recomputes, from the catalog's versions (the clustering is
//    deterministic), the version from which the device is in this group and
//    the groups it was in before, newest first. For each in turn it writes
//    DeviceHandoff there, which freezes the device, and reads the frozen
//    record and its newest finished commands. It visits every one (a group
//    the device left long ago may still hold an older record, frozen, and
//    one never frozen must be) and keeps the record placed last, this
//    group's own included, the higher version breaking a tie. It reads
//    before it writes, because a write to a group that does not exist
//    creates one; and as a read's "no group" is cached for a while where it
//    is given (KgroupService), a group is taken to be absent only if it is
//    still reported absent handoff_absent_wait later. Then it commits
//    DeviceImport here: the commands in imports that fit one update each,
//    the record last. A
//    read showing a newer claim than this node's catalog knows means this
//    node is behind: it waits for its catalog instead. Commands for the
//    device wait in order meanwhile. Every step is idempotent, so a leader
//    that dies anywhere in between leaves its successor to redo them all.
class DeviceLeaders {
 public:
  DeviceLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector, const Catalog& catalog,
                DriverFactory& drivers, RoutineMessages& messages, core::Metrics& metrics, kgroup::GroupClient& groups,
                DeviceLeaderOptions options);
  DeviceLeaders(const DeviceLeaders&) = delete;
  DeviceLeaders& operator=(const DeviceLeaders&) = delete;
  ~DeviceLeaders();

  void start();

  // The devices this node leads right now (a device being handed over is
  // not led yet).
  std::vector<std::string> led_devices() const;
  size_t subscriptions() const;

 private:
  struct Watch;
  struct Session;
  struct Handoff;
  // Where a device of a group stands in the catalog's history.
  struct Placement {
    uint64_t arrival = 0;  // the catalog version from which it is in the group (0: from the start)
    // The groups it was in before, newest first (the group itself too if it
    // was there before); empty when it arrived with a catalog change.
    std::vector<std::string> sources;
  };
  enum class Readiness { live, needs_handoff, catalog_behind };
  using SessionKey = std::tuple<std::string, uint64_t, uint32_t>;

  void scan();
  void sync_session(Session& session, kgroup::GroupReplica& replica);
  void start_polling(const SessionKey& key, const std::string& device);
  void poll(const SessionKey& key, const std::string& device);
  Placement placement(const std::string& device, const std::string& target);
  // The group target of every device at a catalog version (cached).
  const std::map<std::string, std::string>& groups_at(uint64_t version);
  Readiness readiness(const SessionKey& key, const std::string& device, const Placement& placed) const;
  Handoff* handoff(const SessionKey& key, const std::string& device, uint64_t id);
  void start_handoff(const SessionKey& key, const std::string& device, Placement placed);
  void continue_handoff(const SessionKey& key, const std::string& device, uint64_t id);
  void freeze_source(const SessionKey& key, const std::string& device, uint64_t id);
  void take_source(const SessionKey& key, const std::string& device, uint64_t id, const proto::DeviceQueryReply& reply);
  void retry_handoff(const SessionKey& key, const std::string& device, uint64_t id, const std::string& problem);
  void give_up_handoff(const SessionKey& key, const std::string& device, const std::string& why);
  void import(const SessionKey& key, const std::string& device, uint64_t id);
  void submit_imports(const SessionKey& key, const std::string& device, uint64_t id,
                      std::vector<proto::DeviceUpdate> imports, size_t next);
  void on_reading(const SessionKey& key, const std::string& device, const DriverResult& result);
  void run_commands(const SessionKey& key);
  void actuate(const SessionKey& key, const std::string& command_id);
  // Finishes an actuated command ok once `device` shows its values (`seen`,
  // then reads), or fails it when nothing changes toward them until
  // `stall_deadline` (APEX §7.3).
  void confirm_actuation(const SessionKey& key, const std::string& command_id, const std::string& device,
                         Attributes seen, core::TimePoint stall_deadline);
  void finish_command(const SessionKey& key, const std::string& command_id, proto::CommandStatus status,
                      std::string detail, const Attributes& state_after);
  using Committed = std::function<void(bool committed)>;
  void submit(const SessionKey& key, const proto::DeviceUpdate& update, Committed done);
  Session* session(const SessionKey& key);
  kgroup::GroupReplica* replica(const SessionKey& key) const;
  const DeviceGroupState* state(const SessionKey& key) const;

  void on_subscribe(const core::Message& message, const proto::DeviceSubscribe& subscribe);
  // Notes the renewal; answers with the locks whose holder or token is no
  // longer the current one in a group this node leads (LocksLost).
  void on_lock_renew(const core::Message& message, const proto::LockRenew& renew);
  // False only if this node leads `device`'s group with current reads and
  // the lock is not (holder, token).
  bool holds(const std::string& device, const std::string& holder, uint64_t token) const;
  // Releases the locks of this session's devices whose holders stopped renewing.
  void reclaim_locks(const SessionKey& key);
  // Sends the device's committed state to its subscribers.
  void notify(const SessionKey& key, const std::string& device, const DeviceGroupState::Device& record);
  // Devices per answer to a renewal (about 60 bytes each): one datagram.
  static constexpr int kDevicesPerAnswer = 12;
  // How far back in catalog versions a device's earlier groups are looked
  // for (each version costs one clustering, cached), and how many of them
  // a handoff visits: enough for any burst of catalog changes a building
  // sees before its leaders catch up.
  static constexpr uint64_t kHandoffLookback = 64;
  static constexpr size_t kMaxHandoffSources = 4;

  core::Env& env_;
  kgroup::GroupHost& host_;
  const kgroup::GroupSelector& selector_;
  const Catalog& catalog_;
  DriverFactory& drivers_;
  RoutineMessages& messages_;
  kgroup::GroupClient& groups_;
  DeviceLeaderOptions options_;
  core::ScopedTimer scan_timer_;
  std::map<SessionKey, std::unique_ptr<Session>> sessions_;
  // device -> subscriber -> lease end
  std::map<std::string, std::map<core::NodeId, core::TimePoint>> subscribers_;
  // device -> holder -> last renewal heard (by any member, so by this node)
  std::map<std::string, std::map<std::string, core::TimePoint>> lock_renewals_;
  std::map<uint64_t, std::map<std::string, std::string>> groups_at_;
  uint64_t next_handoff_ = 1;

  core::Counter& observations_;
  core::Counter& commands_ok_;
  core::Counter& commands_failed_;
  core::Counter& notifications_;
  core::Counter& driver_errors_;
  core::Counter& actuations_not_effective_;
  core::Counter& locks_reclaimed_;
  core::Counter& handoffs_imported_;
  core::Counter& handoffs_fresh_;
};

}  // namespace mesh::routine
