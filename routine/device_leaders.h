#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/env.h"
#include "core/metrics.h"
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
  // taken back: its routine's whole group is gone or cut off. Routine
  // leaders renew every few seconds; a new device leader counts from its
  // take-over, so a fail-over never shortens a holder's time.
  core::Duration lock_reclaim_after = std::chrono::seconds(30);
  // Env time at the Unix epoch: changes are stamped in microseconds since it
  // (the agent sets it from the system clock, the simulator leaves it at 0),
  // so every node reads a change's time alike.
  core::TimePoint clock_origin{};
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
//    actuating afterwards.
class DeviceLeaders {
 public:
  DeviceLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector,
                const Catalog& catalog, DriverFactory& drivers, RoutineMessages& messages, core::Metrics& metrics,
                DeviceLeaderOptions options);
  DeviceLeaders(const DeviceLeaders&) = delete;
  DeviceLeaders& operator=(const DeviceLeaders&) = delete;
  ~DeviceLeaders();

  void start();

  // The devices this node leads right now.
  std::vector<std::string> led_devices() const;
  size_t subscriptions() const;

 private:
  struct Watch;
  struct Session;
  using SessionKey = std::tuple<std::string, uint64_t, uint32_t>;

  void scan();
  void sync_session(Session& session, kgroup::GroupReplica& replica);
  void poll(const SessionKey& key, const std::string& device);
  void on_reading(const SessionKey& key, const std::string& device, const DriverResult& result);
  void run_commands(const SessionKey& key);
  void actuate(const SessionKey& key, const std::string& command_id);
  void finish_command(const SessionKey& key, const std::string& command_id, proto::CommandStatus status,
                      std::string detail, const Attributes& state_after);
  using Committed = std::function<void(bool committed)>;
  void submit(const SessionKey& key, const proto::DeviceUpdate& update, Committed done);
  Session* session(const SessionKey& key);
  kgroup::GroupReplica* replica(const SessionKey& key) const;
  const DeviceGroupState* state(const SessionKey& key) const;

  void on_subscribe(const core::Message& message, const proto::DeviceSubscribe& subscribe);
  void on_lock_renew(const core::Message& message, const proto::LockRenew& renew);
  // Releases the locks of this session's devices whose holders stopped renewing.
  void reclaim_locks(const SessionKey& key);
  // Sends the device's committed state to its subscribers.
  void notify(const SessionKey& key, const std::string& device, const DeviceGroupState::Device& record);
  // Devices per answer to a renewal (about 60 bytes each): one datagram.
  static constexpr int kDevicesPerAnswer = 12;

  core::Env& env_;
  kgroup::GroupHost& host_;
  const kgroup::GroupSelector& selector_;
  const Catalog& catalog_;
  DriverFactory& drivers_;
  RoutineMessages& messages_;
  DeviceLeaderOptions options_;
  core::ScopedTimer scan_timer_;
  std::map<SessionKey, std::unique_ptr<Session>> sessions_;
  // device -> subscriber -> lease end
  std::map<std::string, std::map<core::NodeId, core::TimePoint>> subscribers_;
  // device -> holder -> last renewal heard (by any member, so by this node)
  std::map<std::string, std::map<std::string, core::TimePoint>> lock_renewals_;

  core::Counter& observations_;
  core::Counter& commands_ok_;
  core::Counter& commands_failed_;
  core::Counter& notifications_;
  core::Counter& driver_errors_;
  core::Counter& locks_reclaimed_;
};

}  // namespace mesh::routine
