#include "routine/device_watcher.h"

#include <algorithm>

namespace mesh::routine {

DeviceWatcher::DeviceWatcher(core::Env& env, RoutineMessages& messages, const kgroup::GroupSelector& selector,
                             const Catalog& catalog, EpochOf epoch_of, Locate locate, DeviceWatcherOptions options)
    : env_(env),
      messages_(messages),
      selector_(selector),
      catalog_(catalog),
      epoch_of_(std::move(epoch_of)),
      locate_(std::move(locate)),
      options_(options),
      renew_timer_(env) {
  messages_.on(proto::RoutineBody::kNotify, [this](const core::Message& message, const proto::RoutineBody& body) {
    on_notify(message, body.notify());
  });
}

uint64_t DeviceWatcher::watch(std::vector<std::string> devices, Listener listener) {
  const uint64_t handle = next_handle_++;
  watches_[handle] = Watch{std::move(devices), std::move(listener)};
  if (!renew_timer_.active()) renew_timer_.start_periodic(options_.renew_interval, [this] { renew(); });
  renew();
  return handle;
}

void DeviceWatcher::unwatch(uint64_t handle) {
  watches_.erase(handle);
  if (watches_.empty()) renew_timer_.cancel();
}

std::set<std::string> DeviceWatcher::watched_devices() const {
  std::set<std::string> out;
  for (const auto& [handle, watch] : watches_) {
    if (watch.devices.empty()) {
      for (const auto& [id, spec] : catalog_.devices()) out.insert(id);
    } else {
      out.insert(watch.devices.begin(), watch.devices.end());
    }
  }
  return out;
}

void DeviceWatcher::renew() {
  // One subscription per group, sent to each member this node computes for
  // it and to the leader that last notified (a group keeps the members it
  // was formed with until it migrates, so a view that changed since may
  // compute others).
  // A group's subscription is split into datagram-sized parts: one message
  // naming every device of a large group (a central group of hundreds of
  // devices) would exceed a datagram and never be sent.
  struct Subscription {
    std::vector<proto::RoutineBody> parts;
    size_t last_part_bytes = 0;
  };
  std::map<std::string, Subscription> by_group;
  std::map<std::string, std::set<core::NodeId>> leaders;
  const auto lease_ms =
      static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease).count());
  for (const std::string& device : watched_devices()) {
    const auto target = selector_.device_group(device);
    if (const auto seen = view_.find(device); seen != view_.end() && seen->second.group == target.to_string()) {
      leaders[target.to_string()].insert(seen->second.leader);
    }
    auto& subscription = by_group[target.to_string()];
    // A repeated string field costs its tag and length byte besides the id (at most kMaxDeviceIdLength).
    const size_t device_bytes = device.size() + 2;
    if (subscription.parts.empty() || subscription.last_part_bytes + device_bytes > kSubscriptionPartBytes) {
      subscription.parts.emplace_back().mutable_subscribe()->set_lease_ms(lease_ms);
      subscription.last_part_bytes = 0;
    }
    subscription.parts.back().mutable_subscribe()->add_devices(device);
    subscription.last_part_bytes += device_bytes;
  }
  for (const auto& [group, subscription] : by_group) {
    const auto target = kgroup::GroupTarget::parse(group);
    if (!target) continue;
    const auto heard = group_heard_.find(group);
    if (locate_ && locating_.count(group) == 0 &&
        (heard == group_heard_.end() || env_.now() - heard->second > options_.lease)) {
      locating_.insert(group);
      locate_(*target, [this, group = group, parts = subscription.parts](std::optional<core::NodeId> leader,
                                                                       const std::vector<proto::DeviceStateMsg>& states) {
        locating_.erase(group);
        if (!leader) return;
        group_heard_[group] = env_.now();
        for (const auto& part : parts) messages_.send(*leader, part);
        for (const auto& msg : states) take(msg, group, std::nullopt, *leader, /*current=*/true);
      });
    }
    std::set<core::NodeId> destinations = leaders[group];
    for (const core::NodeId member : selector_.members(*target, epoch_of_(*target))) destinations.insert(member);
    for (const core::NodeId destination : destinations) {
      for (const auto& part : subscription.parts) messages_.send(destination, part);
    }
  }
}

void DeviceWatcher::on_notify(const core::Message& /*message*/, const proto::DeviceNotify& notify) {
  group_heard_[notify.group()] = env_.now();
  for (const auto& msg : notify.devices()) {
    take(msg, notify.group(), std::pair<uint64_t, uint32_t>{notify.epoch(), notify.generation()},
         core::NodeId(notify.leader()), notify.answer());
  }
}

void DeviceWatcher::take(const proto::DeviceStateMsg& msg, const std::string& group,
                         std::optional<std::pair<uint64_t, uint32_t>> instance, core::NodeId leader, bool current) {
  Seen seen;
  seen.record = from_proto(msg);
  seen.group = group;
  seen.leader = leader;
  seen.heard_at = env_.now();
  auto it = view_.find(msg.device());
  const Seen* held = it != view_.end() && it->second.group == group ? &it->second : nullptr;
  // A read through the leader does not say which instance answered: within
  // one group it counts as the instance held.
  seen.instance = instance.value_or(held != nullptr ? held->instance : std::pair<uint64_t, uint32_t>{});
  if (held != nullptr) {
    const bool same_instance = held->instance == seen.instance;
    const bool overtaken = same_instance && held->record.version > seen.record.version;
    const bool older =
        !current && (held->instance > seen.instance || (same_instance && held->record.version >= seen.record.version));
    if (overtaken || older) return;
  }
  if (it != view_.end() && it->second.record.version == seen.record.version && it->second.group == seen.group &&
      it->second.record.attributes == seen.record.attributes && it->second.record.up == seen.record.up) {
    it->second = seen;  // nothing new to tell the listeners
    return;
  }
  view_[msg.device()] = seen;
  for (const auto& [handle, watch] : watches_) {
    const bool wanted = watch.devices.empty() ||
                        std::find(watch.devices.begin(), watch.devices.end(), msg.device()) != watch.devices.end();
    if (wanted && watch.listener) watch.listener(msg.device(), seen);
  }
}

}  // namespace mesh::routine
