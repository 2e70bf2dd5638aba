#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/metrics.h"
#include "kgroup/group_selector.h"
#include "routine/catalog.h"
#include "routine/device_group_state.h"
#include "routine/routine_messages.h"

namespace mesh::routine {

struct DeviceWatcherOptions {
  // Subscriptions are renewed this often at every member of each group...
  core::Duration renew_interval = std::chrono::seconds(3);
  // ...and lapse at a member that hears nothing for this long.
  core::Duration lease = std::chrono::seconds(10);
};

// A node's subscriptions to device leaders, and what they told it: the
// node's view of the devices it watches (meshctl device watch, and the
// routine leaders of the next layer). See DeviceLeaders for the leader's
// side. A notification replaces the view of a device only if it is newer:
// a higher version from the same group, or any version from another group
// (the device's group changes when the catalog re-clusters it). A leader's
// answer replaces it too, unless it carries a lower version from the same
// group instance: versions only grow within one instance, so that answer was
// computed before a notification that overtook it.
//
// Subscriptions go to every member this node computes for the device's
// group and to the leader that last notified; a group this node has not
// heard from within one lease (a new subscriber, or a group formed with
// members its view no longer computes) is located by a read through its
// leader, which also seeds the view.
class DeviceWatcher {
 public:
  struct Seen {
    DeviceGroupState::Device record;
    std::string group;
    std::pair<uint64_t, uint32_t> instance;  // the group's (epoch, generation)
    core::NodeId leader;
    core::TimePoint heard_at{};
  };
  // Every change of the view of one device.
  using Listener = std::function<void(const std::string& device, const Seen& seen)>;
  using EpochOf = std::function<uint64_t(const kgroup::GroupTarget& target)>;
  // Reads a group's devices through its leader (the agent routes the read
  // with redirects, as it routes writes) and calls back with the leader and
  // the states, or nothing if the read failed.
  using Located = std::function<void(std::optional<core::NodeId> leader, const std::vector<proto::DeviceStateMsg>& states)>;
  using Locate = std::function<void(const kgroup::GroupTarget& target, Located done)>;

  DeviceWatcher(core::Env& env, RoutineMessages& messages, const kgroup::GroupSelector& selector,
                const Catalog& catalog, EpochOf epoch_of, Locate locate, DeviceWatcherOptions options);
  DeviceWatcher(const DeviceWatcher&) = delete;
  DeviceWatcher& operator=(const DeviceWatcher&) = delete;

  // Watches `devices` (empty: every device of the catalog, as it changes)
  // until unwatch(); returns a handle.
  uint64_t watch(std::vector<std::string> devices, Listener listener);
  void unwatch(uint64_t handle);

  const std::map<std::string, Seen>& view() const { return view_; }
  size_t watches() const { return watches_.size(); }

 private:
  struct Watch {
    std::vector<std::string> devices;  // empty: all
    Listener listener;
  };
  std::set<std::string> watched_devices() const;
  void renew();
  // Device ids per subscription message, in bytes: with the envelope, its
  // authentication and the lease, well within one datagram (core::Link's 1400).
  static constexpr size_t kSubscriptionPartBytes = 1000;
  void on_notify(const core::Message& message, const proto::DeviceNotify& notify);
  // Takes one device's state if it is newer than the view's: `current`
  // (a leader's answer to this node, or a read through the leader) always is.
  // `instance` is unknown for a read through the leader; `current` marks a
  // leader's answer (to a subscription or a read) rather than a change.
  void take(const proto::DeviceStateMsg& msg, const std::string& group,
            std::optional<std::pair<uint64_t, uint32_t>> instance, core::NodeId leader, bool current);

  core::Env& env_;
  RoutineMessages& messages_;
  const kgroup::GroupSelector& selector_;
  const Catalog& catalog_;
  EpochOf epoch_of_;
  Locate locate_;
  DeviceWatcherOptions options_;
  // Groups whose leader is being located, and when each last notified.
  std::set<std::string> locating_;
  std::map<std::string, core::TimePoint> group_heard_;
  core::ScopedTimer renew_timer_;
  std::map<uint64_t, Watch> watches_;
  uint64_t next_handle_ = 1;
  std::map<std::string, Seen> view_;
};

}  // namespace mesh::routine
