#include "routine/device_group_state.h"

#include <set>

#include <fmt/format.h>

#include "routine/device_codec.h"
#include "routine/fault_points.h"

namespace mesh::routine {
namespace {

constexpr size_t kMaxRemembered = 4096;

// Whether a command that ended with `status` may have reached its device.
bool may_have_run(proto::CommandStatus status) {
  return status != proto::COMMAND_PENDING && status != proto::COMMAND_REFUSED && status != proto::COMMAND_DEVICE_DOWN;
}

std::string moved_reason(const std::string& device, const std::string& to) {
  return fmt::format("device {} moved to {} (a catalog change re-clustered it); send the command again", device, to);
}

}  // namespace

proto::DeviceStateMsg to_proto(const std::string& id, const DeviceGroupState::Device& device) {
  proto::DeviceStateMsg msg;
  msg.set_device(id);
  to_proto(device.attributes, *msg.mutable_attributes());
  msg.set_version(device.version);
  msg.set_known(device.known);
  msg.set_up(device.up);
  msg.set_reason(device.reason);
  msg.set_changed_at_us(device.changed_at_us);
  msg.set_held(device.held);
  msg.set_placed_version(device.placed_version);
  msg.set_moved_to(device.moved_to);
  msg.set_frozen_for_version(device.frozen_for_version);
  msg.set_availability_events(device.availability_events);
  for (const auto& [attribute, writer] : device.attribute_writers) {
    (*msg.mutable_attribute_writers())[attribute] = writer;
  }
  return msg;
}

DeviceGroupState::Device from_proto(const proto::DeviceStateMsg& msg) {
  DeviceGroupState::Device device;
  device.attributes = from_proto(msg.attributes());
  device.version = msg.version();
  device.known = msg.known();
  device.up = msg.up();
  device.reason = msg.reason();
  device.changed_at_us = msg.changed_at_us();
  device.held = msg.held();
  device.placed_version = msg.placed_version();
  device.moved_to = msg.moved_to();
  device.frozen_for_version = msg.frozen_for_version();
  device.availability_events = msg.availability_events();
  device.attribute_writers.insert(msg.attribute_writers().begin(), msg.attribute_writers().end());
  return device;
}

proto::CommandRecordMsg to_proto(const DeviceGroupState::Command& command) {
  proto::CommandRecordMsg msg;
  msg.set_command_id(command.id);
  msg.set_device(command.device);
  to_proto(command.values, *msg.mutable_values());
  msg.set_origin(command.origin.value());
  msg.set_lock_holder(command.lock_holder);
  msg.set_lock_token(command.lock_token);
  msg.set_after_lease(command.after_lease);
  msg.set_accepted_position(command.accepted_position);
  msg.set_actuating(command.actuating);
  msg.set_actuated_position(command.actuated_position);
  *msg.mutable_outcome() = command.outcome;
  return msg;
}

void DeviceGroupState::apply(uint64_t seq, std::string_view update) {
  ++position_;
  position_by_group_seq_[seq] = position_;
  while (position_by_group_seq_.size() > kMaxRemembered) position_by_group_seq_.erase(position_by_group_seq_.begin());
  apply_update(update);
  if (on_apply_) on_apply_();
}

void DeviceGroupState::apply_update(std::string_view update) {
  const auto write = decode_write(update);
  if (!write) return;
  const auto decoded = parse_message<proto::DeviceUpdate>(write->payload);
  if (!decoded) return;
  switch (decoded->kind_case()) {
    case proto::DeviceUpdate::kObserved: {
      const auto& observed = decoded->observed();
      if (check_device_id(observed.device())) return;
      Device& device = devices_[observed.device()];
      if (device.frozen()) return;
      device.held = true;
      Attributes attributes = observed.up() ? from_proto(observed.attributes()) : device.attributes;
      if (device.known && device.up == observed.up() && device.attributes == attributes) return;
      if (device.known && device.up != observed.up()) ++device.availability_events;
      device.attributes = std::move(attributes);
      device.known = true;
      device.up = observed.up();
      device.reason = observed.up() ? std::string() : observed.reason();
      device.changed_at_us = observed.observed_at_us();
      ++device.version;
      return;
    }
    case proto::DeviceUpdate::kAccept: {
      const auto& accept = decoded->accept();
      if (accept.command_id().empty() || commands_.count(accept.command_id()) != 0) return;
      Command& command = commands_[accept.command_id()];
      command.id = accept.command_id();
      command.device = accept.device();
      command.values = from_proto(accept.values());
      command.origin = core::NodeId(accept.origin());
      command.lock_holder = accept.lock_holder();
      command.lock_token = accept.lock_token();
      command.after_lease = accept.after_lease() && !accept.lock_holder().empty();
      command.accepted_position = position_;
      command.outcome.set_command_id(command.id);
      if (const Device* moved = device(command.device); moved != nullptr && moved->frozen()) {
        finish(command, proto::COMMAND_REFUSED, moved_reason(command.device, moved->moved_to));
        forget_old_commands();
      }
      return;
    }
    case proto::DeviceUpdate::kActuating: {
      const auto it = commands_.find(decoded->actuating().command_id());
      if (it == commands_.end() || it->second.done() || it->second.actuating) return;
      if (it->second.after_lease) {
        if (auto refusal = restore_after_lease(it->second)) {
          finish(it->second, proto::COMMAND_REFUSED, std::move(*refusal));
          forget_old_commands();
          return;
        }
      } else if (auto refusal = lock_refusal(it->second)) {
        // A routine's command whose lock is gone is fenced (its invocation
        // stops); any other command only met a lock.
        finish(it->second, it->second.lock_holder.empty() ? proto::COMMAND_REFUSED : proto::COMMAND_FENCED,
               std::move(*refusal));
        forget_old_commands();
        return;
      }
      it->second.actuating = true;
      it->second.actuated_position = position_;
      record_state_before(it->second);
      return;
    }
    case proto::DeviceUpdate::kLock: {
      const proto::DeviceLockRequest& request = decoded->lock();
      // Moved away: its lock lives in the device's next group now (the
      // requester's catalog is behind; it asks there once it catches up).
      if (const Device* moved = device(request.device()); moved != nullptr && moved->frozen()) return;
      if (request.serial_key_us() != 0) {
        locks_.place(request.device(), request.holder(),
                     DeviceLocks::Entry{request.serial_key_us(), request.ready(), request.expected_first_use_us(),
                                        request.expected_done_us()});
      } else {
        locks_.request(request.device(), request.holder(), request.wait(), request.started_us(), request.round());
      }
      return;
    }
    case proto::DeviceUpdate::kUnlock:
      locks_.release(decoded->unlock().device(), decoded->unlock().holder(), decoded->unlock().serial_key_us(),
                     decoded->unlock().before_round());
      return;
    case proto::DeviceUpdate::kOutcome: {
      const auto& outcome = decoded->outcome();
      const auto it = commands_.find(outcome.command_id());
      if (it == commands_.end() || it->second.done() || outcome.status() == proto::COMMAND_PENDING) return;
      // The state before is the group's own record, not the writer's.
      google::protobuf::RepeatedPtrField<proto::AttributeMsg> before;
      before.Swap(it->second.outcome.mutable_state_before());
      const std::optional<uint64_t> events_before =
          it->second.outcome.has_availability_events() ? std::optional(it->second.outcome.availability_events())
                                                       : std::nullopt;
      it->second.outcome = outcome;
      it->second.outcome.mutable_state_before()->Swap(&before);
      if (events_before) {
        it->second.outcome.set_availability_events(*events_before);
      } else {
        it->second.outcome.clear_availability_events();
      }
      finished_order_.push_back(it->first);
      if (outcome.status() == proto::COMMAND_OK && outcome.state_after_size() > 0) {
        Device& device = devices_[it->second.device];
        device.held = true;
        Attributes after = device.attributes;
        for (auto& [name, value] : from_proto(outcome.state_after())) after[name] = value;
        if (after != device.attributes || !device.up || !device.known) {
          // An ok command is the device answering: if it was down, this is
          // its restart event.
          if (device.known && !device.up) ++device.availability_events;
          device.attributes = std::move(after);
          device.known = true;
          device.up = true;
          device.reason.clear();
          ++device.version;
        }
      }
      forget_old_commands();
      return;
    }
    case proto::DeviceUpdate::kHandoff:
      apply_handoff(decoded->handoff());
      return;
    case proto::DeviceUpdate::kImported:
      apply_import(decoded->imported());
      return;
    case proto::DeviceUpdate::kHello:
    case proto::DeviceUpdate::KIND_NOT_SET:
      return;
  }
}

void DeviceGroupState::record_state_before(Command& command) {
  const auto record = devices_.find(command.device);
  if (record == devices_.end()) return;  // never observed nor commanded: no record to keep
  for (const auto& [name, value] : command.values) record->second.attribute_writers[name] = command.lock_holder;
  const Device* known = &record->second;
  if (!known->known) return;
  Attributes before;
  for (const auto& [name, value] : command.values) {
    if (const auto it = known->attributes.find(name); it != known->attributes.end()) before.emplace(name, it->second);
  }
  to_proto(before, *command.outcome.mutable_state_before());
  command.outcome.set_availability_events(known->availability_events);
}

std::optional<std::string> DeviceGroupState::restore_after_lease(Command& undo) {
  const auto known = devices_.find(undo.device);
  Attributes kept;
  std::vector<std::string> overwritten;
  for (const auto& [name, value] : undo.values) {
    bool still_ours = false;
    if (known != devices_.end()) {
      const auto writer = known->second.attribute_writers.find(name);
      still_ours = writer != known->second.attribute_writers.end() && writer->second == undo.lock_holder;
    }
    if (still_ours) {
      kept.emplace(name, value);
      continue;
    }
    overwritten.push_back(name);
    hand_over_undo_value(undo, name, value);
  }
  if (kept.empty()) {
    return fmt::format(
        "not restored: device {} was written since by {} (EV serializes that write after this "
        "routine, so it stands)",
        undo.device, last_writers(undo.device, overwritten));
  }
  undo.values = std::move(kept);
  return std::nullopt;
}

void DeviceGroupState::hand_over_undo_value(const Command& undo, const std::string& attribute, const Value& value) {
  // The routine's own last write of the attribute, then the first command
  // of another holder that wrote it after that, both in the order they
  // began actuating (commands refused before that wrote nothing).
  uint64_t own_position = 0;
  for (const auto& [id, command] : commands_) {
    if (command.device == undo.device && command.lock_holder == undo.lock_holder && !command.after_lease &&
        command.actuated_position != 0 && command.values.count(attribute) != 0) {
      own_position = std::max(own_position, command.actuated_position);
    }
  }
  if (own_position == 0) return;  // forgotten: nothing to hand over to
  Command* overwriter = nullptr;
  for (auto& [id, command] : commands_) {
    if (command.device != undo.device || command.lock_holder == undo.lock_holder ||
        command.actuated_position <= own_position || command.values.count(attribute) == 0) {
      continue;
    }
    if (overwriter == nullptr || command.actuated_position < overwriter->actuated_position) overwriter = &command;
  }
  if (overwriter == nullptr) return;
  Attributes before = from_proto(overwriter->outcome.state_before());
  before[attribute] = value;
  overwriter->outcome.clear_state_before();
  to_proto(before, *overwriter->outcome.mutable_state_before());
}

std::string DeviceGroupState::last_writers(const std::string& device,
                                           const std::vector<std::string>& attributes) const {
  std::set<std::string> writers;
  const auto known = devices_.find(device);
  for (const auto& name : attributes) {
    std::string writer = "a command without a lock";
    if (known != devices_.end()) {
      const auto it = known->second.attribute_writers.find(name);
      if (it != known->second.attribute_writers.end() && !it->second.empty()) {
        writer = "routine invocation " + it->second;
      }
    }
    writers.insert(std::move(writer));
  }
  return fmt::format("{}", fmt::join(writers, ", "));
}

std::optional<std::string> DeviceGroupState::lock_refusal(const Command& command) const {
  if (fault_points().ignore_locks) return std::nullopt;
  const DeviceLocks::Lock* lock = locks_.find(command.device);
  const bool locked = lock != nullptr && !lock->free();
  if (command.lock_holder.empty()) {
    if (!locked) return std::nullopt;
    return fmt::format("device {} is locked by routine invocation {}; try again when it ends", command.device,
                       lock->holder);
  }
  if (locked && lock->holder == command.lock_holder && lock->token == command.lock_token) return std::nullopt;
  return fmt::format("the lock of {} on device {} (token {}) is no longer held{}", command.lock_holder, command.device,
                     command.lock_token, locked ? "; it is held by " + lock->holder : std::string());
}

void DeviceGroupState::finish(Command& command, proto::CommandStatus status, std::string detail) {
  command.outcome.set_command_id(command.id);
  command.outcome.set_status(status);
  command.outcome.set_detail(std::move(detail));
  finished_order_.push_back(command.id);
}

void DeviceGroupState::apply_handoff(const proto::DeviceHandoff& handoff) {
  if (check_device_id(handoff.device()) || handoff.to().empty() || handoff.at_version() == 0) return;
  Device& device = devices_[handoff.device()];
  // A claim older than this group's own placement comes from a leader whose
  // catalog is behind: the device is this group's, by a newer version.
  if (device.held && !device.frozen() && device.placed_version >= handoff.at_version()) return;
  if (device.frozen() && device.frozen_for_version >= handoff.at_version()) return;
  device.moved_to = handoff.to();
  device.frozen_for_version = handoff.at_version();
  locks_.forget_users(handoff.device());
  for (const Command* open : pending()) {
    if (open->device != handoff.device()) continue;
    Command& command = commands_.at(open->id);
    if (command.actuating) {
      finish(command, proto::COMMAND_INTERRUPTED,
             fmt::format("device {} moved to {} while its leader was actuating it: the device may or may not have "
                         "applied it",
                         command.device, handoff.to()));
    } else {
      finish(command, proto::COMMAND_REFUSED, moved_reason(command.device, handoff.to()));
    }
  }
  forget_old_commands();
}

void DeviceGroupState::apply_import(const proto::DeviceImport& imported) {
  if (check_device_id(imported.device()) || imported.placed_version() == 0) return;
  if (const Device* current = device(imported.device())) {
    // A newer claim froze the device here first (this importer's catalog
    // is behind), or the device is live here by this or a newer placement.
    if (current->frozen() && current->frozen_for_version > imported.placed_version()) return;
    if (!current->frozen() && current->held && current->placed_version >= imported.placed_version()) return;
  }
  for (const auto& msg : imported.commands()) {
    if (msg.command_id().empty() || msg.device() != imported.device() ||
        msg.outcome().status() == proto::COMMAND_PENDING) {
      continue;
    }
    const auto found = commands_.find(msg.command_id());
    if (found != commands_.end()) {
      // Accepted here too (a client sent it again): if the old group may
      // have run it, it must not run here.
      Command& local = found->second;
      if (!local.done() && may_have_run(msg.outcome().status())) {
        local.outcome = msg.outcome();
        finished_order_.push_back(local.id);
      }
      continue;
    }
    Command& command = commands_[msg.command_id()];
    command.id = msg.command_id();
    command.device = msg.device();
    command.values = from_proto(msg.values());
    command.origin = core::NodeId(msg.origin());
    command.accepted_position = position_;
    command.outcome = msg.outcome();
    finished_order_.push_back(command.id);
  }
  forget_old_commands();
  if (!imported.last()) return;
  for (const auto& carried : imported.carried_locks()) {
    if (carried.device() == imported.device()) locks_.carry_over(carried);
  }
  Device& device = devices_[imported.device()];
  if (imported.has_record()) {
    Device incoming = from_proto(imported.record());
    // Above this group's own older record too: versions never go back.
    const uint64_t version = device.held ? std::max(incoming.version, device.version + 1) : incoming.version;
    device.attributes = std::move(incoming.attributes);
    device.known = incoming.known;
    device.up = incoming.up;
    device.reason = std::move(incoming.reason);
    device.changed_at_us = incoming.changed_at_us;
    device.version = version;
    // Never below the old group's count (a routine's start count may come
    // from there) and, if this group held the device before, above its own
    // (or from here): an equal count must mean no event in between.
    device.availability_events = device.held ? std::max(incoming.availability_events, device.availability_events + 1)
                                             : incoming.availability_events;
    device.attribute_writers = std::move(incoming.attribute_writers);
  }
  device.held = true;
  device.placed_version = imported.placed_version();
  device.moved_to.clear();
  device.frozen_for_version = 0;
}

proto::DeviceQueryReply DeviceGroupState::handoff_answer(const std::string& id) const {
  proto::DeviceQueryReply reply;
  if (const Device* record = device(id)) {
    *reply.add_devices() = to_proto(id, *record);
    reply.set_found(true);
  }
  if (const DeviceLocks::Lock* lock = locks_.find(id)) {
    proto::DeviceLockMsg& carried = *reply.mutable_handoff_lock();
    carried.set_device(id);
    carried.set_last_token(lock->last_token);
    carried.set_floor_key_us(lock->floor_key_us);
    carried.set_floor_holder(lock->floor_holder);
  }
  size_t bytes = 0;
  for (auto it = finished_order_.rbegin(); it != finished_order_.rend(); ++it) {
    const Command& command = commands_.at(*it);
    if (command.device != id) continue;
    proto::CommandRecordMsg msg;
    msg.set_command_id(command.id);
    msg.set_device(command.device);
    msg.set_origin(command.origin.value());
    msg.mutable_outcome()->set_command_id(command.id);
    msg.mutable_outcome()->set_status(command.outcome.status());
    msg.mutable_outcome()->set_detail(command.outcome.detail().substr(0, kHandoffDetailBytes));
    bytes += msg.ByteSizeLong() + 2;
    if (bytes > kHandoffHistoryBytes) break;
    *reply.add_history() = std::move(msg);
  }
  return reply;
}

void DeviceGroupState::forget_old_commands() {
  while (finished_order_.size() > kMaxFinishedCommands) {
    commands_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

const DeviceGroupState::Device* DeviceGroupState::device(const std::string& id) const {
  const auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : &it->second;
}

const DeviceGroupState::Command* DeviceGroupState::command(const std::string& id) const {
  const auto it = commands_.find(id);
  return it == commands_.end() ? nullptr : &it->second;
}

std::vector<const DeviceGroupState::Command*> DeviceGroupState::pending() const {
  std::vector<const Command*> out;
  for (const auto& [id, command] : commands_) {
    if (!command.done()) out.push_back(&command);
  }
  std::sort(out.begin(), out.end(),
            [](const Command* a, const Command* b) { return a->accepted_position < b->accepted_position; });
  return out;
}

std::optional<uint64_t> DeviceGroupState::position_of(uint64_t group_seq) const {
  const auto it = position_by_group_seq_.find(group_seq);
  if (it == position_by_group_seq_.end()) return std::nullopt;
  return it->second;
}

core::Expected<std::string, std::string> DeviceGroupState::read(std::string_view query) const {
  const auto decoded = parse_message<proto::DeviceQuery>(query);
  if (!decoded) return core::Unexpected(std::string("malformed device query"));
  proto::DeviceQueryReply reply;
  switch (decoded->kind_case()) {
    case proto::DeviceQuery::kAllDevices:
      // A frozen record is no longer this group's to report.
      for (const auto& [id, device] : devices_) {
        if (!device.frozen()) *reply.add_devices() = to_proto(id, device);
      }
      reply.set_found(true);
      break;
    case proto::DeviceQuery::kStates:
      for (const auto& id : decoded->states().devices()) {
        const auto device = devices_.find(id);
        if (device != devices_.end() && !device->second.frozen()) *reply.add_devices() = to_proto(id, device->second);
      }
      reply.set_found(true);
      break;
    case proto::DeviceQuery::kLock:
      *reply.mutable_lock() =
          locks_.status(decoded->lock().device(), decoded->lock().holder(), decoded->lock().lineage());
      reply.set_found(true);
      break;
    case proto::DeviceQuery::kCommandId:
      if (const Command* found = command(decoded->command_id())) {
        *reply.mutable_command() = to_proto(*found);
        reply.set_found(true);
      }
      break;
    case proto::DeviceQuery::kHandoffDevice:
      if (check_device_id(decoded->handoff_device())) return core::Unexpected(std::string("malformed device id"));
      reply = handoff_answer(decoded->handoff_device());
      break;
    case proto::DeviceQuery::KIND_NOT_SET:
      return core::Unexpected(std::string("empty device query"));
  }
  return reply.SerializeAsString();
}

std::string DeviceGroupState::snapshot() const {
  proto::DeviceGroupSnapshot snapshot;
  for (const auto& [id, device] : devices_) *snapshot.add_devices() = to_proto(id, device);
  // Pending commands first in acceptance order, then finished ones oldest
  // first, so restore() rebuilds the same forgetting order.
  for (const Command* command : pending()) *snapshot.add_commands() = to_proto(*command);
  for (const auto& id : finished_order_) *snapshot.add_commands() = to_proto(commands_.at(id));
  snapshot.set_position(position_);
  for (auto& lock : locks_.to_proto()) *snapshot.add_locks() = std::move(lock);
  return snapshot.SerializeAsString();
}

bool DeviceGroupState::restore(std::string_view snapshot) {
  const auto decoded = parse_message<proto::DeviceGroupSnapshot>(snapshot);
  if (!decoded) return false;
  std::map<std::string, Device> devices;
  for (const auto& msg : decoded->devices()) devices[msg.device()] = from_proto(msg);
  std::map<std::string, Command> commands;
  std::deque<std::string> finished;
  for (const auto& msg : decoded->commands()) {
    Command command;
    command.id = msg.command_id();
    command.device = msg.device();
    command.values = from_proto(msg.values());
    command.origin = core::NodeId(msg.origin());
    command.lock_holder = msg.lock_holder();
    command.lock_token = msg.lock_token();
    command.after_lease = msg.after_lease();
    command.accepted_position = msg.accepted_position();
    command.actuating = msg.actuating();
    command.actuated_position = msg.actuated_position();
    command.outcome = msg.outcome();
    if (command.id.empty() || !commands.emplace(command.id, command).second) return false;
    if (command.done()) finished.push_back(command.id);
  }
  DeviceLocks locks;
  if (!locks.restore(decoded->locks())) return false;
  devices_ = std::move(devices);
  commands_ = std::move(commands);
  locks_ = std::move(locks);
  finished_order_ = std::move(finished);
  position_ = decoded->position();
  position_by_group_seq_.clear();
  return true;
}

}  // namespace mesh::routine
