#include "routine/device_leaders.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "routine/device_codec.h"
#include "routine/fault_points.h"
#include "routine/routine_group_state.h"

namespace mesh::routine {
namespace {

proto::CommandStatus status_of(DriverFailure failure) {
  switch (failure) {
    case DriverFailure::unreachable:
      return proto::COMMAND_DEVICE_DOWN;
    case DriverFailure::timeout:
      return proto::COMMAND_TIMEOUT;
    case DriverFailure::protocol:
    case DriverFailure::refused:
      return proto::COMMAND_DRIVER_ERROR;
  }
  return proto::COMMAND_DRIVER_ERROR;
}

// Whether a device's `state` has every value a command set.
bool shows(const Attributes& state, const Attributes& values) {
  return std::all_of(values.begin(), values.end(), [&state](const auto& wanted) {
    const auto it = state.find(wanted.first);
    return it != state.end() && it->second == wanted.second;
  });
}

}  // namespace

struct DeviceLeaders::Handoff {
  Handoff(core::Env& env, uint64_t handoff_id) : id(handoff_id), retry_timer(env) {}
  uint64_t id;
  Placement placed;
  size_t next = 0;  // the source being visited
  core::TimePoint deadline;
  std::vector<proto::CommandRecordMsg> history;  // newest first, from every source visited
  std::vector<proto::DeviceLockMsg> carried_locks;  // from every source visited
  // The newest record found so far: the one placed last (then the higher
  // version). A group the device left long ago may still hold an older
  // one, frozen, so every source is visited. `record` is empty when the
  // newest is this group's own.
  std::optional<proto::DeviceStateMsg> record;
  std::string from;
  std::pair<uint64_t, uint64_t> newest{};  // placed_version, version of `from`'s record
  bool importing = false;
  std::optional<core::TimePoint> absent_since;  // the source being visited answered "no group"
  void consider(const std::string& group, const proto::DeviceStateMsg& held, bool own) {
    const std::pair<uint64_t, uint64_t> rank{held.placed_version(), held.version()};
    if (!from.empty() && rank <= newest) return;
    newest = rank;
    from = group;
    record = own ? std::nullopt : std::optional<proto::DeviceStateMsg>(held);
  }
  core::ScopedTimer retry_timer;
};

struct DeviceLeaders::Watch {
  explicit Watch(core::Env& env) : poll_timer(env), retry_timer(env) {}
  DeviceSpec spec;
  std::unique_ptr<DeviceDriver> driver;
  std::string open_error;  // the driver URI could not be opened
  core::ScopedTimer poll_timer;
  core::ScopedTimer retry_timer;
  bool reading = false;
  bool observing = false;  // an observation is being committed
  uint32_t failures = 0;
  std::string busy_command;  // being actuated (or its outcome committed)
  bool live = false;         // the group holds its record: polled, actuated, announced
  std::unique_ptr<Handoff> handoff;
  core::TimePoint next_handoff{};  // a handoff that stopped is not started again before this
};

struct DeviceLeaders::Session {
  core::TimePoint started;
  std::set<std::string> reclaiming;  // devices whose lock release is being committed
  std::map<std::string, std::unique_ptr<Watch>> watches;
  bool announced = false;
  bool commands_scheduled = false;
  std::set<std::string> finishing;  // commands whose outcome is being committed
};

DeviceLeaders::DeviceLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector,
                             const Catalog& catalog, DriverFactory& drivers, RoutineMessages& messages,
                             core::Metrics& metrics, kgroup::GroupClient& groups, DeviceLeaderOptions options)
    : env_(env),
      host_(host),
      selector_(selector),
      catalog_(catalog),
      drivers_(drivers),
      messages_(messages),
      groups_(groups),
      options_(options),
      scan_timer_(env),
      observations_(metrics.counter("device_observations_total")),
      commands_ok_(metrics.counter("device_commands_total", {{"result", "ok"}})),
      commands_failed_(metrics.counter("device_commands_total", {{"result", "failed"}})),
      notifications_(metrics.counter("device_notifications_total")),
      driver_errors_(metrics.counter("device_driver_errors_total")),
      actuations_not_effective_(metrics.counter("device_actuations_not_effective_total")),
      locks_reclaimed_(metrics.counter("device_locks_reclaimed_total")),
      handoffs_imported_(metrics.counter("device_handoffs_total", {{"result", "imported"}})),
      handoffs_fresh_(metrics.counter("device_handoffs_total", {{"result", "fresh"}})) {
  messages_.on(proto::RoutineBody::kSubscribe, [this](const core::Message& message, const proto::RoutineBody& body) {
    on_subscribe(message, body.subscribe());
  });
  messages_.on(proto::RoutineBody::kLockRenew, [this](const core::Message& message, const proto::RoutineBody& body) {
    on_lock_renew(message, body.lock_renew());
  });
}

DeviceLeaders::~DeviceLeaders() {
  for (const auto& [key, session] : sessions_) {
    if (auto* s = const_cast<DeviceGroupState*>(state(key))) s->set_on_apply({});
  }
}

void DeviceLeaders::start() {
  scan_timer_.start_periodic(options_.scan_interval, [this] { scan(); });
}

kgroup::GroupReplica* DeviceLeaders::replica(const SessionKey& key) const {
  return host_.find(std::get<0>(key), std::get<1>(key), std::get<2>(key));
}

const DeviceGroupState* DeviceLeaders::state(const SessionKey& key) const {
  kgroup::GroupReplica* r = replica(key);
  return r == nullptr ? nullptr : dynamic_cast<const DeviceGroupState*>(&r->state_machine());
}

DeviceLeaders::Session* DeviceLeaders::session(const SessionKey& key) {
  const auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : it->second.get();
}

std::vector<std::string> DeviceLeaders::led_devices() const {
  std::vector<std::string> out;
  for (const auto& [key, s] : sessions_) {
    for (const auto& [device, watch] : s->watches) {
      if (watch->live) out.push_back(device);
    }
  }
  return out;
}

size_t DeviceLeaders::subscriptions() const {
  size_t n = 0;
  for (const auto& [device, subscribers] : subscribers_) n += subscribers.size();
  return n;
}

void DeviceLeaders::scan() {
  const core::TimePoint now = env_.now();
  for (auto it = subscribers_.begin(); it != subscribers_.end();) {
    std::erase_if(it->second, [now](const auto& entry) { return entry.second <= now; });
    it = it->second.empty() ? subscribers_.erase(it) : std::next(it);
  }
  std::set<SessionKey> leading;
  for (kgroup::GroupReplica* r : host_.replicas()) {
    const auto& config = r->config();
    if (config.target.kind != kgroup::TargetKind::cluster || !r->serving()) continue;
    auto* device_state = dynamic_cast<DeviceGroupState*>(&r->state_machine());
    if (device_state == nullptr) continue;
    SessionKey key{config.target.to_string(), config.epoch, config.generation};
    leading.insert(key);
    auto& slot = sessions_[key];
    if (!slot) {
      slot = std::make_unique<Session>();
      slot->started = env_.now();
      core::log("routine").info("leading devices of group={} epoch={} generation={} term={} node={}", std::get<0>(key),
                                config.epoch, config.generation, r->term(), messages_.self().to_string());
      device_state->set_on_apply([this, key] {
        Session* s = session(key);
        if (s == nullptr || s->commands_scheduled) return;
        s->commands_scheduled = true;
        env_.start_timer(core::Duration::zero(), [this, key] {
          if (Session* again = session(key)) {
            again->commands_scheduled = false;
            run_commands(key);
          }
        });
      });
    }
    sync_session(*slot, *r);
    run_commands(key);
    reclaim_locks(key);
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (leading.count(it->first) != 0) {
      ++it;
      continue;
    }
    core::log("routine").info("stopped leading devices of group={} epoch={}", std::get<0>(it->first),
                              std::get<1>(it->first));
    if (auto* s = const_cast<DeviceGroupState*>(state(it->first))) s->set_on_apply({});
    it = sessions_.erase(it);
  }
}

void DeviceLeaders::sync_session(Session& s, kgroup::GroupReplica& r) {
  const std::string target = r.config().target.to_string();
  const SessionKey key{target, r.config().epoch, r.config().generation};
  std::map<std::string, const DeviceSpec*> wanted;
  for (const auto& [id, spec] : catalog_.devices()) {
    if (selector_.device_group(id).to_string() == target) wanted[id] = &spec;
  }
  std::erase_if(s.watches, [&](const auto& entry) {
    const auto it = wanted.find(entry.first);
    if (it == wanted.end()) return true;
    Watch& w = *entry.second;
    const DeviceSpec& spec = *it->second;
    if (spec.driver == w.spec.driver && spec.kind == w.spec.kind) {
      w.spec = spec;  // labels or location: the driver stays
      return false;
    }
    // A new driver, but not under a command being actuated: a new watch
    // would not know it is busy and could actuate the command again.
    return w.busy_command.empty();
  });
  for (const auto& [id, spec] : wanted) {
    auto& watch = s.watches[id];
    const std::string device = id;
    if (!watch) {
      watch = std::make_unique<Watch>(env_);
      watch->spec = *spec;
      auto opened = drivers_.open(*spec);
      if (!opened) {
        watch->open_error = opened.error();
        core::log("routine").warn("device {}: cannot open driver {}: {}", device, spec->driver, opened.error());
      } else {
        watch->driver = std::move(*opened);
        watch->driver->watch([this, key, device](const DriverResult& result) { on_reading(key, device, result); });
      }
    }
    Watch& w = *watch;
    const Placement placed = placement(device, target);
    const Readiness ready = readiness(key, device, placed);
    if (ready == Readiness::live) {
      if (w.live) continue;
      w.live = true;
      w.handoff.reset();
      start_polling(key, device);
      if (s.announced) {
        if (const DeviceGroupState* st = state(key); st != nullptr && st->device(device) != nullptr) {
          notify(key, device, *st->device(device));
        }
      }
      continue;
    }
    if (w.live) {
      // Frozen by a newer claim that this node's catalog has not reached.
      core::log("routine").info("device {} was taken over by another group; group={} waits for the catalog", device,
                                target);
      w.live = false;
      w.poll_timer.cancel();
    }
    if (ready == Readiness::needs_handoff && !w.handoff && env_.now() >= w.next_handoff) {
      start_handoff(key, device, placed);
    }
  }
  if (!s.announced) {
    // A new leader: tell every subscriber where its devices stand.
    s.announced = true;
    if (const DeviceGroupState* st = state(key)) {
      for (const auto& [id, watch] : s.watches) {
        const auto* record = st->device(id);
        if (watch->live && record != nullptr) notify(key, id, *record);
      }
    }
  }
}

void DeviceLeaders::start_polling(const SessionKey& key, const std::string& device) {
  Session* s = session(key);
  if (s == nullptr) return;
  const auto it = s->watches.find(device);
  if (it == s->watches.end()) return;
  // Spread first polls over one interval so a leader taking over many
  // devices does not read them all at once.
  const auto offset = core::Duration(static_cast<int64_t>(
      env_.rng().below(static_cast<uint64_t>(std::max<int64_t>(options_.poll_interval.count(), 1)))));
  it->second->poll_timer.start(offset, [this, key, device] {
    Session* again = session(key);
    if (again == nullptr) return;
    const auto w = again->watches.find(device);
    if (w == again->watches.end()) return;
    w->second->poll_timer.start_periodic(options_.poll_interval, [this, key, device] { poll(key, device); });
    poll(key, device);
  });
}

void DeviceLeaders::poll(const SessionKey& key, const std::string& device) {
  Session* s = session(key);
  if (s == nullptr) return;
  const auto it = s->watches.find(device);
  if (it == s->watches.end()) return;
  Watch& w = *it->second;
  if (w.reading || !w.live) return;
  if (!w.driver) {
    on_reading(key, device, core::Unexpected(DriverError{DriverFailure::protocol, w.open_error}));
    return;
  }
  w.reading = true;
  w.driver->read([this, key, device](const DriverResult& result) {
    if (Session* again = session(key)) {
      if (const auto found = again->watches.find(device); found != again->watches.end()) {
        found->second->reading = false;
      }
    }
    on_reading(key, device, result);
  });
}

void DeviceLeaders::on_reading(const SessionKey& key, const std::string& device, const DriverResult& result) {
  Session* s = session(key);
  const DeviceGroupState* st = state(key);
  if (s == nullptr || st == nullptr) return;
  const auto it = s->watches.find(device);
  if (it == s->watches.end() || !it->second->live) return;
  Watch& w = *it->second;
  const DeviceGroupState::Device* record = st->device(device);
  proto::DeviceUpdate update;
  proto::DeviceObserved& observed = *update.mutable_observed();
  observed.set_device(device);
  observed.set_observed_at_us((env_.now() - options_.clock_origin).count());
  if (result) {
    w.failures = 0;
    Attributes attributes = result.value();
    for (const auto& dropped : sanitize_state(w.spec.kind, attributes)) {
      core::log("routine").debug("device {}: driver reported {} outside the schema; ignored", device, dropped);
    }
    if (record != nullptr && record->known && record->up && record->attributes == attributes) return;
    observed.set_up(true);
    to_proto(attributes, *observed.mutable_attributes());
  } else {
    driver_errors_.add();
    ++w.failures;
    if (w.failures < options_.down_after_failures) return;
    if (record != nullptr && record->known && !record->up) return;
    observed.set_up(false);
    observed.set_reason(fmt::format("{}: {}", to_string(result.error().failure), result.error().reason));
  }
  if (w.observing) return;  // the next reading tries again
  w.observing = true;
  submit(key, update, [this, key, device, up = observed.up(), reason = observed.reason()](bool committed) {
    Session* again = session(key);
    if (again == nullptr) return;
    const auto found = again->watches.find(device);
    if (found != again->watches.end()) found->second->observing = false;
    if (!committed) return;
    observations_.add();
    if (!up) core::log("routine").info("device {} is down: {}", device, reason);
    if (const DeviceGroupState* now = state(key)) {
      if (const auto* latest = now->device(device)) notify(key, device, *latest);
    }
  });
}

void DeviceLeaders::run_commands(const SessionKey& key) {
  Session* s = session(key);
  const DeviceGroupState* st = state(key);
  if (s == nullptr || st == nullptr) return;
  std::set<std::string> ordered;  // devices with an earlier command still open
  for (const DeviceGroupState::Command* command : st->pending()) {
    if (!ordered.insert(command->device).second || s->finishing.count(command->id) != 0) continue;
    const auto it = s->watches.find(command->device);
    Watch* w = it == s->watches.end() ? nullptr : it->second.get();
    // Until the handoff places its record here, its commands wait in order.
    if (w != nullptr && (!w->busy_command.empty() || !w->live)) continue;
    const std::string id = command->id;
    if (command->actuating) {
      if (w != nullptr) w->busy_command = id;
      finish_command(key, id, proto::COMMAND_INTERRUPTED,
                     "its device leader stopped while actuating it: the device may or may not have applied it "
                     "(meshctl device shows the state the new leader reads)",
                     {});
      continue;
    }
    if (w == nullptr) {
      // Never actuated here (an actuating one was handled above): refuse it
      // with the reason, so its client hears at once and may send it again.
      const bool known = catalog_.find(command->device) != nullptr;
      finish_command(key, id, proto::COMMAND_REFUSED,
                     known ? fmt::format("device {} moved to group {} (a catalog change re-clustered it); send the "
                                         "command again",
                                         command->device, selector_.device_group(command->device).to_string())
                           : fmt::format("no device {} in the catalog", command->device),
                     {});
      continue;
    }
    w->busy_command = id;
    if (auto problem = check_command(w->spec, command->values)) {
      finish_command(key, id, proto::COMMAND_REFUSED, *problem, {});
      continue;
    }
    const auto* record = st->device(command->device);
    if (!w->driver || (record != nullptr && record->known && !record->up)) {
      finish_command(key, id, proto::COMMAND_DEVICE_DOWN,
                     fmt::format("device {} is down: {}", command->device,
                                 !w->driver ? w->open_error : record->reason),
                     {});
      continue;
    }
    proto::DeviceUpdate update;
    update.mutable_actuating()->set_command_id(id);
    kgroup::GroupReplica* r = replica(key);
    update.mutable_actuating()->set_term(r == nullptr ? 0 : r->term());
    submit(key, update, [this, key, id, device = command->device](bool committed) {
      const DeviceGroupState* now = state(key);
      const DeviceGroupState::Command* applied = now == nullptr ? nullptr : now->command(id);
      if (committed && applied != nullptr && applied->actuating && !applied->done()) {
        actuate(key, id);
        return;
      }
      if (committed && applied != nullptr && applied->done()) {
        // Refused when applied: the device's lock did not allow it.
        commands_failed_.add();
        core::log("routine").info("command {} device={} {}: {}", id, device,
                                  proto::CommandStatus_Name(applied->outcome.status()), applied->outcome.detail());
        env_.start_timer(core::Duration::zero(), [this, key] { run_commands(key); });
      }
      // Done, or not leading any more: the successor finds it accepted
      // (never actuated) or actuating (then reports it interrupted).
      if (Session* again = session(key)) {
        if (const auto found = again->watches.find(device); found != again->watches.end()) {
          found->second->busy_command.clear();
        }
      }
    });
  }
}

void DeviceLeaders::actuate(const SessionKey& key, const std::string& command_id) {
  Session* s = session(key);
  const DeviceGroupState* st = state(key);
  kgroup::GroupReplica* r = replica(key);
  if (s == nullptr || st == nullptr || r == nullptr) return;
  const DeviceGroupState::Command* command = st->command(command_id);
  if (command == nullptr || command->done()) return;
  const auto it = s->watches.find(command->device);
  if (it == s->watches.end() || !it->second->driver) return;
  Watch& w = *it->second;
  if (!r->can_read()) {
    // No quorum lease right now: another leader may exist. Wait for it to
    // come back (or for this session to end).
    w.retry_timer.start(options_.scan_interval, [this, key, command_id] { actuate(key, command_id); });
    return;
  }
  const std::string device = command->device;
  if (fault_points().actuate_twice) w.driver->actuate(command->values, command_id, [](const DriverResult&) {});
  w.driver->actuate(command->values, command_id, [this, key, command_id, device](const DriverResult& result) {
    if (result) {
      confirm_actuation(key, command_id, device, result.value(), env_.now() + options_.actuation_stall);
      return;
    }
    driver_errors_.add();
    finish_command(key, command_id, status_of(result.error().failure),
                   fmt::format("{}: {}", to_string(result.error().failure), result.error().reason), {});
    poll(key, device);
  });
}

void DeviceLeaders::confirm_actuation(const SessionKey& key, const std::string& command_id, const std::string& device,
                                      Attributes seen, core::TimePoint stall_deadline) {
  Session* s = session(key);
  const DeviceGroupState* st = state(key);
  const DeviceGroupState::Command* command = st == nullptr ? nullptr : st->command(command_id);
  const auto watch = s == nullptr ? decltype(s->watches)::iterator{} : s->watches.find(device);
  // Not leading any more: the successor finds it actuating and reports it
  // interrupted.
  if (s == nullptr || command == nullptr || command->done() || watch == s->watches.end()) return;
  Watch& w = *watch->second;
  sanitize_state(w.spec.kind, seen);
  if (shows(seen, command->values) || options_.actuation_stall == core::Duration::zero() || !w.driver ||
      fault_points().trust_actuation_reports) {
    finish_command(key, command_id, proto::COMMAND_OK, {}, seen);
    poll(key, device);
    return;
  }
  // The driver is the watch's: destroyed with it, it calls back no more.
  w.driver->read([this, key, command_id, device, seen, stall_deadline](const DriverResult& read) {
    Session* again = session(key);
    const auto found = again == nullptr ? decltype(again->watches)::iterator{} : again->watches.find(device);
    if (again == nullptr || found == again->watches.end()) return;
    const DeviceGroupState* now_state = state(key);
    const DeviceGroupState::Command* now_command = now_state == nullptr ? nullptr : now_state->command(command_id);
    if (now_command == nullptr || now_command->done()) return;
    Attributes state = read ? read.value() : seen;
    sanitize_state(found->second->spec.kind, state);
    core::TimePoint deadline = stall_deadline;
    bool moved = false;
    for (const auto& [name, wanted] : now_command->values) {
      const auto before = seen.find(name);
      const auto after = state.find(name);
      if (after != state.end() && (before == seen.end() || before->second != after->second)) moved = true;
    }
    if (moved) deadline = env_.now() + options_.actuation_stall;  // progress: wait on
    const bool done = shows(state, now_command->values);
    if (!done && env_.now() >= deadline) {
      const DeviceSpec& spec = found->second->spec;
      if (read) {
        actuations_not_effective_.add();
        finish_command(key, command_id, proto::COMMAND_NOT_EFFECTIVE,
                       fmt::format("actuation failure: the device still shows {}, unchanged for {:g} s, after the "
                                   "command set {}",
                                   format_attributes(spec.kind, state),
                                   std::chrono::duration<double>(options_.actuation_stall).count(),
                                   format_attributes(spec.kind, now_command->values)),
                       state);
      } else {
        finish_command(key, command_id, proto::COMMAND_TIMEOUT,
                       fmt::format("actuated, but no read of the device showed its effect: {}", read.error().reason),
                       {});
      }
      poll(key, device);
      return;
    }
    if (done) {
      finish_command(key, command_id, proto::COMMAND_OK, {}, state);
      poll(key, device);
      return;
    }
    found->second->retry_timer.start(options_.actuation_check_interval,
                                     [this, key, command_id, device, state, deadline] {
                                       confirm_actuation(key, command_id, device, state, deadline);
                                     });
  });
}

void DeviceLeaders::finish_command(const SessionKey& key, const std::string& command_id,
                                   proto::CommandStatus status, std::string detail, const Attributes& state_after) {
  const DeviceGroupState* st = state(key);
  const DeviceGroupState::Command* command = st == nullptr ? nullptr : st->command(command_id);
  if (command == nullptr) return;
  const std::string device = command->device;
  Attributes after = state_after;
  if (const Session* s = session(key)) {
    if (const auto it = s->watches.find(device); it != s->watches.end()) sanitize_state(it->second->spec.kind, after);
  }
  if (Session* s = session(key)) s->finishing.insert(command_id);
  proto::DeviceUpdate update;
  proto::CommandOutcome& outcome = *update.mutable_outcome();
  outcome.set_command_id(command_id);
  outcome.set_status(status);
  outcome.set_detail(detail);
  to_proto(after, *outcome.mutable_state_after());
  submit(key, update, [this, key, command_id, device, status, detail](bool committed) {
    if (Session* s = session(key)) {
      s->finishing.erase(command_id);
      if (const auto it = s->watches.find(device); it != s->watches.end() && it->second->busy_command == command_id) {
        it->second->busy_command.clear();
      }
    }
    if (!committed) return;
    (status == proto::COMMAND_OK ? commands_ok_ : commands_failed_).add();
    core::log("routine").info("command {} device={} {}{}", command_id, device, proto::CommandStatus_Name(status),
                              detail.empty() ? "" : ": " + detail);
    if (const DeviceGroupState* now = state(key)) {
      if (const auto* record = now->device(device)) notify(key, device, *record);
    }
    run_commands(key);
  });
}

void DeviceLeaders::submit(const SessionKey& key, const proto::DeviceUpdate& update, Committed done) {
  kgroup::GroupReplica* r = replica(key);
  if (r == nullptr || !r->serving()) {
    done(false);
    return;
  }
  r->submit(kgroup::ClientStateMachine::encode_write(env_.rng().next_u64() | 1, DeviceGroupState::encode(update)),
            [done = std::move(done)](const kgroup::SubmitResult& result) {
              done(result.status == kgroup::SubmitStatus::committed);
            });
}

const std::map<std::string, std::string>& DeviceLeaders::groups_at(uint64_t version) {
  const uint64_t latest = catalog_.version();
  const uint64_t lowest = latest > kHandoffLookback ? latest - kHandoffLookback : 0;
  std::erase_if(groups_at_, [&](const auto& entry) { return entry.first < lowest || entry.first > latest; });
  auto& groups = groups_at_[version];
  if (!groups.empty()) return groups;
  std::vector<kgroup::DeviceLocation> locations;
  for (const auto& [id, spec] : catalog_.devices_at(version)) locations.push_back({id, spec.location});
  const auto clusters = kgroup::DeviceClusters::build(std::move(locations), selector_.options().clusters);
  for (const auto& cluster : clusters.clusters()) {
    const std::string target = kgroup::GroupTarget{kgroup::TargetKind::cluster, cluster.id}.to_string();
    for (const auto& device : cluster.devices) groups[device] = target;
  }
  return groups;
}

DeviceLeaders::Placement DeviceLeaders::placement(const std::string& device, const std::string& target) {
  const uint64_t latest = catalog_.version();
  const uint64_t lowest = latest > kHandoffLookback ? latest - kHandoffLookback : 0;
  const auto group_at = [this, &device](uint64_t version) {
    const auto& groups = groups_at(version);
    const auto it = groups.find(device);
    return it == groups.end() ? std::string() : it->second;
  };
  uint64_t arrival = latest;
  while (arrival > lowest && group_at(arrival - 1) == target) --arrival;
  // Here from the start, or for longer than the look-back: nothing to take.
  if (arrival == lowest) return {};
  Placement placed;
  placed.arrival = arrival;
  for (uint64_t version = arrival; version > lowest && placed.sources.size() < kMaxHandoffSources; --version) {
    const std::string group = group_at(version - 1);
    if (!group.empty() && std::find(placed.sources.begin(), placed.sources.end(), group) == placed.sources.end()) {
      placed.sources.push_back(group);
    }
  }
  return placed;
}

DeviceLeaders::Readiness DeviceLeaders::readiness(const SessionKey& key, const std::string& device,
                                                  const Placement& placed) const {
  const DeviceGroupState* st = state(key);
  const DeviceGroupState::Device* record = st == nullptr ? nullptr : st->device(device);
  if (record == nullptr) return placed.arrival == 0 ? Readiness::live : Readiness::needs_handoff;
  if (record->frozen()) {
    // Frozen by a claim this node's catalog does not know yet, or by an
    // older one this group must now take back.
    const uint64_t claim = placed.arrival == 0 ? catalog_.version() : placed.arrival;
    return record->frozen_for_version > claim ? Readiness::catalog_behind : Readiness::needs_handoff;
  }
  if (placed.arrival == 0 || (record->held && record->placed_version >= placed.arrival)) return Readiness::live;
  return Readiness::needs_handoff;
}

DeviceLeaders::Handoff* DeviceLeaders::handoff(const SessionKey& key, const std::string& device, uint64_t id) {
  Session* s = session(key);
  if (s == nullptr) return nullptr;
  const auto it = s->watches.find(device);
  if (it == s->watches.end() || !it->second->handoff || it->second->handoff->id != id) return nullptr;
  return it->second->handoff.get();
}

void DeviceLeaders::start_handoff(const SessionKey& key, const std::string& device, Placement placed) {
  Session* s = session(key);
  if (s == nullptr) return;
  const auto it = s->watches.find(device);
  if (it == s->watches.end()) return;
  const std::string& target = std::get<0>(key);
  if (placed.arrival == 0) {
    // In this group for as long as the look-back sees, yet frozen here by
    // an older claim: take it back from where that claim moved it.
    const DeviceGroupState* st = state(key);
    const DeviceGroupState::Device* record = st == nullptr ? nullptr : st->device(device);
    placed.arrival = catalog_.version();
    if (record != nullptr && record->frozen()) placed.sources = {record->moved_to, target};
  }
  const uint64_t id = next_handoff_++;
  auto h = std::make_unique<Handoff>(env_, id);
  h->placed = std::move(placed);
  h->deadline = env_.now() + options_.handoff_timeout;
  std::string sources;
  for (const auto& source : h->placed.sources) sources += (sources.empty() ? "" : ",") + source;
  core::log("routine").info("handoff of device {} to group={} from catalog version {}: sources [{}]", device, target,
                            h->placed.arrival, sources);
  it->second->handoff = std::move(h);
  continue_handoff(key, device, id);
}

void DeviceLeaders::continue_handoff(const SessionKey& key, const std::string& device, uint64_t id) {
  Handoff* h = handoff(key, device, id);
  if (h == nullptr || h->importing) return;
  const std::string& target = std::get<0>(key);
  if (h->next >= h->placed.sources.size()) {
    import(key, device, id);
    return;
  }
  const std::string source = h->placed.sources[h->next];
  if (source == target) {
    // It was here before: this group's own record competes too.
    const DeviceGroupState* st = state(key);
    const DeviceGroupState::Device* own = st == nullptr ? nullptr : st->device(device);
    if (own != nullptr && own->held) h->consider(target, to_proto(device, *own), /*own=*/true);
    ++h->next;
    continue_handoff(key, device, id);
    return;
  }
  const auto parsed = kgroup::GroupTarget::parse(source);
  if (!parsed) {
    ++h->next;
    continue_handoff(key, device, id);
    return;
  }
  // Read first: a write to a group that does not exist would create one.
  proto::DeviceQuery query;
  query.set_handoff_device(device);
  groups_.read_from(
      *parsed, query.SerializeAsString(), options_.handoff_request_timeout,
      [this, key, device, id, source](const auto& result) {
        Handoff* again = handoff(key, device, id);
        if (again == nullptr) return;
        if (!result) {
          if (result.error().find("no group of") == std::string::npos) {
            retry_handoff(key, device, id, fmt::format("reading {}: {}", source, result.error()));
            return;
          }
          // The answer is cached for a while where it is given, so a
          // group created elsewhere meanwhile may be missed: only a
          // second answer, handoff_absent_wait later, settles it.
          const core::TimePoint now = env_.now();
          if (!again->absent_since) again->absent_since = now;
          if (now - *again->absent_since < options_.handoff_absent_wait) {
            again->retry_timer.start(options_.handoff_retry,
                                     [this, key, device, id] { continue_handoff(key, device, id); });
            return;
          }
          core::log("routine").info("handoff of device {}: group {} does not exist", device, source);
          again->absent_since.reset();
          ++again->next;
          continue_handoff(key, device, id);
          return;
        }
        again->absent_since.reset();
        const auto reply = parse_message<proto::DeviceQueryReply>(result->answer);
        if (!reply) {
          retry_handoff(key, device, id, fmt::format("malformed answer from {}", source));
        } else if (reply->devices_size() > 0 && reply->devices(0).frozen_for_version() == again->placed.arrival) {
          take_source(key, device, id, *reply);  // frozen by this claim already
        } else {
          freeze_source(key, device, id);
        }
      });
}

void DeviceLeaders::freeze_source(const SessionKey& key, const std::string& device, uint64_t id) {
  Handoff* h = handoff(key, device, id);
  if (h == nullptr) return;
  const std::string source = h->placed.sources[h->next];
  proto::DeviceUpdate update;
  proto::DeviceHandoff& freeze = *update.mutable_handoff();
  freeze.set_device(device);
  freeze.set_to(std::get<0>(key));
  freeze.set_at_version(h->placed.arrival);
  groups_.write_to(*kgroup::GroupTarget::parse(source), DeviceGroupState::encode(update),
                   options_.handoff_request_timeout, [this, key, device, id, source](const auto& written) {
                     if (handoff(key, device, id) == nullptr) return;
                     if (!written) {
                       retry_handoff(key, device, id, fmt::format("freezing it in {}: {}", source, written.error()));
                       return;
                     }
                     proto::DeviceQuery query;
                     query.set_handoff_device(device);
                     groups_.read_from(
                         *kgroup::GroupTarget::parse(source), query.SerializeAsString(),
                         options_.handoff_request_timeout, [this, key, device, id, source](const auto& result) {
                           if (handoff(key, device, id) == nullptr) return;
                           const auto reply =
                               result ? parse_message<proto::DeviceQueryReply>(result->answer) : std::nullopt;
                           if (!reply) {
                             retry_handoff(key, device, id,
                                           fmt::format("reading {} after the freeze: {}", source,
                                                       result ? std::string("malformed answer") : result.error()));
                             return;
                           }
                           take_source(key, device, id, *reply);
                         });
                   });
}

void DeviceLeaders::take_source(const SessionKey& key, const std::string& device, uint64_t id,
                                const proto::DeviceQueryReply& reply) {
  Handoff* h = handoff(key, device, id);
  if (h == nullptr) return;
  const std::string source = h->placed.sources[h->next];
  if (reply.devices_size() > 0) {
    const proto::DeviceStateMsg& there = reply.devices(0);
    if (there.frozen_for_version() != h->placed.arrival) {
      // Placed there, or frozen, by a claim newer than this node's catalog:
      // the device has moved on. Wait for the catalog (scan starts over).
      give_up_handoff(key, device,
                      fmt::format("{} holds it for catalog version {} (frozen for {}), newer than this node's {}",
                                  source, there.placed_version(), there.frozen_for_version(), h->placed.arrival));
      return;
    }
    core::log("routine").debug("handoff of device {}: {} holds {} version {} placed at {}", device, source,
                               there.held() ? "its record" : "no record", there.version(), there.placed_version());
    if (there.held()) h->consider(source, there, /*own=*/false);
  }
  for (const auto& command : reply.history()) {
    if (h->history.size() * 2 < DeviceGroupState::kMaxFinishedCommands) h->history.push_back(command);
  }
  if (reply.has_handoff_lock() && reply.handoff_lock().device() == device) {
    h->carried_locks.push_back(reply.handoff_lock());
  }
  ++h->next;
  continue_handoff(key, device, id);
}

void DeviceLeaders::retry_handoff(const SessionKey& key, const std::string& device, uint64_t id,
                                  const std::string& problem) {
  Handoff* h = handoff(key, device, id);
  if (h == nullptr) return;
  if (env_.now() >= h->deadline) {
    core::log("routine").warn(
        "handoff of device {} to group={}: no answer from its old group within {:.0f} s (last: {}); it starts "
        "fresh here, without its old record",
        device, std::get<0>(key), core::to_seconds(options_.handoff_timeout), problem);
    h->next = h->placed.sources.size();
    h->record.reset();
    h->from.clear();
    import(key, device, id);
    return;
  }
  core::log("routine").debug("handoff of device {}: {}; trying again", device, problem);
  h->retry_timer.start(options_.handoff_retry, [this, key, device, id] { continue_handoff(key, device, id); });
}

void DeviceLeaders::give_up_handoff(const SessionKey& key, const std::string& device, const std::string& why) {
  core::log("routine").info("handoff of device {} to group={} stopped: {}", device, std::get<0>(key), why);
  Session* s = session(key);
  if (s == nullptr) return;
  if (const auto it = s->watches.find(device); it != s->watches.end()) {
    it->second->handoff.reset();
    it->second->next_handoff = env_.now() + options_.handoff_retry;
  }
}

void DeviceLeaders::import(const SessionKey& key, const std::string& device, uint64_t id) {
  Handoff* h = handoff(key, device, id);
  if (h == nullptr) return;
  h->importing = true;
  std::vector<proto::DeviceUpdate> imports;
  auto fresh_import = [&](bool last) {
    proto::DeviceUpdate update;
    proto::DeviceImport& imported = *update.mutable_imported();
    imported.set_device(device);
    imported.set_placed_version(h->placed.arrival);
    imported.set_last(last);
    imported.set_from(h->from);
    return update;
  };
  // Oldest first, so the group forgets them in their order.
  proto::DeviceUpdate chunk = fresh_import(false);
  for (auto it = h->history.rbegin(); it != h->history.rend(); ++it) {
    *chunk.mutable_imported()->add_commands() = *it;
    if (DeviceGroupState::encode(chunk).size() <= options_.max_update_bytes) continue;
    chunk.mutable_imported()->mutable_commands()->RemoveLast();
    if (chunk.imported().commands_size() > 0) imports.push_back(chunk);
    chunk = fresh_import(false);
    *chunk.mutable_imported()->add_commands() = *it;
    if (DeviceGroupState::encode(chunk).size() > options_.max_update_bytes) {
      chunk.mutable_imported()->mutable_commands()->RemoveLast();  // one command alone too large: dropped
    }
  }
  if (chunk.imported().commands_size() > 0) imports.push_back(chunk);
  proto::DeviceUpdate last = fresh_import(true);
  if (h->record) *last.mutable_imported()->mutable_record() = *h->record;
  for (const auto& carried : h->carried_locks) *last.mutable_imported()->add_carried_locks() = carried;
  imports.push_back(last);
  core::log("routine").info("handoff of device {} to group={}: importing {} from {} with {} finished commands", device,
                            std::get<0>(key), h->record ? "its record" : "no record",
                            h->from.empty() ? std::string("nowhere (it starts fresh)") : h->from, h->history.size());
  submit_imports(key, device, id, std::move(imports), 0);
}

void DeviceLeaders::submit_imports(const SessionKey& key, const std::string& device, uint64_t id,
                                   std::vector<proto::DeviceUpdate> imports, size_t next) {
  if (handoff(key, device, id) == nullptr) return;
  const proto::DeviceUpdate update = imports[next];
  submit(key, update, [this, key, device, id, imports = std::move(imports), next](bool committed) mutable {
    Handoff* h = handoff(key, device, id);
    if (h == nullptr) return;
    if (!committed) {
      // Not leading any more, or the commit was lost: the next scan (here
      // or at the successor) finds the device not live and starts over.
      give_up_handoff(key, device, "an import was not committed");
      return;
    }
    if (next + 1 < imports.size()) {
      submit_imports(key, device, id, std::move(imports), next + 1);
      return;
    }
    // Live from the next scan on.
    (h->from.empty() ? handoffs_fresh_ : handoffs_imported_).add();
  });
}

void DeviceLeaders::on_subscribe(const core::Message& message, const proto::DeviceSubscribe& subscribe) {
  const auto lease = std::min<core::Duration>(std::chrono::milliseconds(subscribe.lease_ms()),
                                              options_.subscription_lease);
  // Answer with the state of every device this node leads, a dozen per
  // datagram: a subscriber that missed a notification converges here.
  std::map<SessionKey, proto::RoutineBody> answers;
  auto send = [this, &message](const SessionKey& key, proto::RoutineBody& body) {
    proto::DeviceNotify& notify = *body.mutable_notify();
    notify.set_leader(messages_.self().value());
    notify.set_group(std::get<0>(key));
    notify.set_epoch(std::get<1>(key));
    notify.set_generation(std::get<2>(key));
    notify.set_answer(true);
    notifications_.add();
    messages_.send(message.src, body);
    body.Clear();
  };
  for (int i = 0; i < subscribe.devices_size(); ++i) {
    const std::string& device = subscribe.devices(i);
    if (check_device_id(device)) continue;
    subscribers_[device][message.src] = env_.now() + lease;
    for (const auto& [key, s] : sessions_) {
      const auto watch = s->watches.find(device);
      if (watch == s->watches.end() || !watch->second->live) continue;
      const DeviceGroupState* st = state(key);
      const auto* record = st == nullptr ? nullptr : st->device(device);
      if (record == nullptr) continue;
      auto& body = answers[key];
      *body.mutable_notify()->add_devices() = to_proto(device, *record);
      if (body.notify().devices_size() >= kDevicesPerAnswer) send(key, body);
    }
  }
  for (auto& [key, body] : answers) {
    if (body.notify().devices_size() > 0) send(key, body);
  }
}

void DeviceLeaders::on_lock_renew(const core::Message& message, const proto::LockRenew& renew) {
  const core::TimePoint now = env_.now();
  proto::RoutineBody answer;
  for (const auto& lock : renew.locks()) {
    if (check_device_id(lock.device()) || lock.holder().empty()) continue;
    lock_renewals_[lock.device()][lock.holder()] = now;
    if (lock.token() != 0 && !holds(lock.device(), lock.holder(), lock.token())) {
      *answer.mutable_locks_lost()->add_locks() = lock;
      if (answer.locks_lost().locks_size() >= kDevicesPerAnswer) {
        messages_.send(message.src, answer);
        answer.clear_locks_lost();
      }
    }
  }
  if (answer.has_locks_lost() && answer.locks_lost().locks_size() > 0) messages_.send(message.src, answer);
}

bool DeviceLeaders::holds(const std::string& device, const std::string& holder, uint64_t token) const {
  // Only the leader of this node's newest instance of the device's group,
  // with current reads and the device live there, may say a lock is gone:
  // a lagging replica has not applied the grant yet, and an older or twin
  // instance keeps a lock table of its own.
  const std::string target = selector_.device_group(device).to_string();
  kgroup::GroupReplica* r = host_.latest(target);
  if (r == nullptr || !r->can_read()) return true;
  const SessionKey key{target, r->config().epoch, r->config().generation};
  const auto it = sessions_.find(key);
  const DeviceGroupState* st = state(key);
  if (it == sessions_.end() || st == nullptr) return true;
  const auto watch = it->second->watches.find(device);
  if (watch == it->second->watches.end() || !watch->second->live) return true;
  const DeviceLocks::Lock* lock = st->locks().find(device);
  return lock != nullptr && lock->holder == holder && lock->token == token;
}

void DeviceLeaders::reclaim_locks(const SessionKey& key) {
  Session* s = session(key);
  const DeviceGroupState* st = state(key);
  if (s == nullptr || st == nullptr) return;
  const core::TimePoint now = env_.now();
  for (const auto& entry : st->locks().locks()) {
    const std::string& device = entry.first;
    const DeviceLocks::Lock& lock = entry.second;
    auto& renewals = lock_renewals_[device];
    std::erase_if(renewals, [&](const auto& renewal) {
      return renewal.first != lock.holder && lock.lineage.count(renewal.first) == 0 &&
             std::find(lock.waiting.begin(), lock.waiting.end(), renewal.first) == lock.waiting.end();
    });
    // The holder, or under EV the lineage entry every later one waits for
    // (its invocation renews its placements as it does its locks).
    const std::string blocker = lock.blocker();
    if (blocker.empty()) continue;
    // Counted from this session's start at the earliest.
    auto [renewed, inserted] = renewals.try_emplace(blocker, now);
    if (inserted || s->reclaiming.count(device) != 0) continue;
    if (renewed->second < s->started) renewed->second = s->started;
    if (now - renewed->second < options_.lock_reclaim_after) continue;
    // Silent for a while: renewals may only be missing their way (views
    // that compute other members). Ask the holder's routine group itself;
    // only a group that is gone, unreachable, or no longer runs the
    // invocation loses the lock.
    s->reclaiming.insert(device);
    const std::string holder = blocker;
    const uint64_t token = lock.token;
    const auto silent_ms = core::to_millis(now - renewed->second);
    const kgroup::GroupTarget routine_group{kgroup::TargetKind::routine, holder.substr(0, holder.find('#'))};
    proto::RoutineQuery query;
    query.set_all(true);
    groups_.read_from(
        routine_group, query.SerializeAsString(), options_.lock_reclaim_after / 3,
        [this, key, device, holder, token, silent_ms, routine_group](const auto& read) {
          Session* again = session(key);
          if (again == nullptr) return;
          const auto reply = read ? parse_message<proto::RoutineQueryReply>(read->answer) : std::nullopt;
          bool running = false;
          if (reply) {
            for (const auto& msg : reply->invocations()) {
              if (msg.phase() != proto::PHASE_DONE && holder_name(routine_group.id, from_proto(msg)) == holder) {
                running = true;
              }
            }
          }
          if (running) {
            lock_renewals_[device][holder] = env_.now();
            again->reclaiming.erase(device);
            return;
          }
          proto::DeviceUpdate update;
          update.mutable_unlock()->set_device(device);
          update.mutable_unlock()->set_holder(holder);
          update.mutable_unlock()->set_reclaimed(true);
          core::log("routine").warn("device {}: reclaiming the lock of {} (token {}): not renewed for {} ms and {}",
                                    device, holder, token, silent_ms,
                                    !read ? "its routine's group did not answer: " + read.error()
                                          : "its routine's group does not run it any more");
          submit(key, update, [this, key, device](bool committed) {
            if (Session* last = session(key)) last->reclaiming.erase(device);
            if (committed) locks_reclaimed_.add();
          });
        });
  }
}

void DeviceLeaders::notify(const SessionKey& key, const std::string& device, const DeviceGroupState::Device& record) {
  const auto subscribers = subscribers_.find(device);
  if (subscribers == subscribers_.end()) return;
  proto::RoutineBody body;
  proto::DeviceNotify& notify = *body.mutable_notify();
  *notify.add_devices() = to_proto(device, record);
  notify.set_leader(messages_.self().value());
  notify.set_group(std::get<0>(key));
  notify.set_epoch(std::get<1>(key));
  notify.set_generation(std::get<2>(key));

  const core::TimePoint now = env_.now();
  for (const auto& [subscriber, until] : subscribers->second) {
    if (until <= now) continue;
    notifications_.add();
    messages_.send(subscriber, body);
  }
}

}  // namespace mesh::routine
