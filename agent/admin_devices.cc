#include "agent/admin_devices.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/admin_response.h"
#include "core/log.h"
#include "routine/adhoc_combo.h"
#include "routine/device_codec.h"
#include "routine/routine_combo.h"
#include "routine/routine_group_state.h"

namespace mesh::agent {
namespace {

std::string status_name(proto::CommandStatus status) {
  switch (status) {
    case proto::COMMAND_OK:
      return "ok";
    case proto::COMMAND_REFUSED:
      return "refused";
    case proto::COMMAND_DEVICE_DOWN:
      return "device_down";
    case proto::COMMAND_DRIVER_ERROR:
      return "driver_error";
    case proto::COMMAND_TIMEOUT:
      return "timeout";
    case proto::COMMAND_INTERRUPTED:
      return "interrupted";
    case proto::COMMAND_FENCED:
      return "fenced";
    case proto::COMMAND_NOT_EFFECTIVE:
      return "not_effective";
    default:
      return "pending";
  }
}

void fill_state(proto::DeviceRow& row, routine::DeviceKind kind, const proto::DeviceStateMsg& state) {
  row.set_state(routine::format_attributes(kind, routine::from_proto(state.attributes())));
  row.set_known(state.known());
  row.set_up(state.up());
  row.set_reason(state.reason());
  row.set_version(state.version());
  row.set_changed_at_unix_ms(state.changed_at_us() / 1000);
}

// One line per command of an ad hoc combo as it ended, in the order they
// ran, and the subject's command id once it ran.
void describe_combo(const routine::RoutineSpec& combo, const routine::RoutineGroupState::Invocation& invocation,
                    const routine::Catalog& catalog, proto::DeviceSetReply& out) {
  const auto commands = routine::expand(combo, invocation.plan.value_or(std::vector<routine::PreconditionCommand>{}));
  for (size_t index = 0; index < commands.size(); ++index) {
    const auto i = static_cast<uint32_t>(index);
    const routine::ComboCommand& command = commands[index];
    const routine::DeviceSpec* device = catalog.find(command.command.device);
    std::string line = fmt::format(
        "{} {}", command.command.device,
        device == nullptr ? std::string("?") : routine::format_attributes(device->kind, command.command.values));
    line += command.serves ? fmt::format(" (precondition: {})", fmt::join(command.rules, ", ")) : " (subject)";
    const auto ran = invocation.commands.find(i);
    line += ran == invocation.commands.end() ? ": not run" : ": " + status_name(ran->second.status);
    if (const auto undone = invocation.undone.find(i); undone != invocation.undone.end()) {
      line += undone->second.status == proto::COMMAND_OK ? ", undone" : ", undo " + status_name(undone->second.status);
    }
    out.add_combo_commands(std::move(line));
    if (!command.serves && ran != invocation.commands.end()) {
      out.set_command_id(routine::command_id(combo.id, invocation, i));
    }
  }
}

}  // namespace

struct AdminDevices::Watch {
  explicit Watch(core::Env& env) : wait_timer(env) {}
  uint64_t handle = 0;
  std::deque<proto::DeviceChange> changes;
  uint64_t next_seq = 1;
  std::optional<Reply> waiting;
  uint64_t waiting_after = 0;
  core::ScopedTimer wait_timer;
};

AdminDevices::AdminDevices(Node& node) : node_(node) {}

AdminDevices::~AdminDevices() {
  *alive_ = false;
  for (const auto& [connection, watch] : watches_) node_.device_watcher().unwatch(watch->handle);
}

proto::DeviceRow AdminDevices::row_of(const routine::DeviceSpec& spec) const {
  proto::DeviceRow row;
  row.set_id(spec.id);
  row.set_kind(std::string(routine::to_string(spec.kind)));
  row.set_room(spec.room);
  row.set_floor(spec.floor);
  row.set_driver(spec.driver);
  for (double coordinate : spec.location) row.add_location(coordinate);
  row.set_group(node_.kgroups().selector().device_group(spec.id).to_string());
  return row;
}

void AdminDevices::devices(const proto::DevicesRequest& request, Reply reply) {
  const routine::Catalog& catalog = node_.catalog();
  for (const std::string& id : request.ids()) {
    if (catalog.find(id) == nullptr) {
      reply(error_response(fmt::format("no device {} in the catalog (meshctl devices lists them)", id)));
      return;
    }
  }
  node_.devices().read_devices(
      timeout_of(request.timeout_ms() == 0 ? 5000 : request.timeout_ms()),
      [this, alive = alive_, request, reply = std::move(reply)](const std::vector<DeviceService::GroupRead>& groups) {
        if (!*alive) return;
        std::map<std::string, std::pair<const DeviceService::GroupRead*, const proto::DeviceStateMsg*>> found;
        for (const auto& group : groups) {
          for (const auto& state : group.devices) found[state.device()] = {&group, &state};
          for (const auto& [id, spec] : node_.catalog().devices()) {
            if (found.count(id) == 0 && node_.kgroups().selector().device_group(id).to_string() == group.group) {
              found[id] = {&group, nullptr};
            }
          }
        }
        proto::AdminResponse response;
        proto::DevicesReply& out = *response.mutable_devices();
        out.set_catalog_version(node_.catalog().version());
        for (const auto& [id, spec] : node_.catalog().devices()) {
          if (!request.ids().empty() && std::find(request.ids().begin(), request.ids().end(), id) == request.ids().end()) {
            continue;
          }
          proto::DeviceRow& row = *out.add_devices();
          row = row_of(spec);
          const auto it = found.find(id);
          if (it == found.end()) {
            row.set_error("its group has not been created yet");
            continue;
          }
          const auto& [group, state] = it->second;
          if (group->error) row.set_error(*group->error);
          if (!group->leader.is_unspecified()) row.set_leader(group->leader.to_string());
          if (state != nullptr) fill_state(row, spec.kind, *state);
        }
        reply(std::move(response));
      });
}

void AdminDevices::set(const proto::DeviceSetRequest& request, Reply reply) {
  const routine::DeviceSpec* spec = node_.catalog().find(request.id());
  if (spec == nullptr) {
    reply(error_response(fmt::format("no device {} in the catalog (meshctl devices lists them)", request.id())));
    return;
  }
  // A value outside the schema is refused here, with the outcome a leader
  // would give it, so meshctl's exit status is the same either way.
  auto refused = [&](std::string detail) {
    proto::AdminResponse response;
    response.mutable_device_set()->set_status("refused");
    response.mutable_device_set()->set_detail(std::move(detail));
    reply(std::move(response));
  };
  routine::Attributes values;
  for (const std::string& assignment : request.assignments()) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      refused(fmt::format("'{}' is not ATTR=VALUE (e.g. power=on)", assignment));
      return;
    }
    const std::string name = assignment.substr(0, eq);
    const auto* attribute = routine::find_attribute(spec->kind, name);
    if (attribute == nullptr) {
      refused(*routine::check_command(*spec, {{name, true}}));
      return;
    }
    auto value = routine::parse_value(*attribute, std::string_view(assignment).substr(eq + 1));
    if (!value) {
      refused(fmt::format("device {}: {}", spec->id, value.error()));
      return;
    }
    values[name] = std::move(*value);
  }
  if (auto problem = routine::check_command(*spec, values)) {
    refused(*problem);
    return;
  }
  // Sent as written it could break a rule, so a command rules apply to runs
  // as a combo (its precondition commands first), unless the operator says
  // otherwise.
  if (!request.ignore_preconditions()) {
    auto rules = routine::rules_for(node_.catalog(), *spec, values);
    if (!rules) {
      refused(
          fmt::format("the precondition rules cannot be applied to this command: {} "
                      "(--ignore-preconditions sends it as written)",
                      rules.error()));
      return;
    }
    if (!rules->empty()) {
      std::optional<routine::LockStrategy> lock = routine::LockStrategy::mesh_default;
      if (!request.lock_strategy().empty()) {
        lock = routine::parse_lock_strategy(request.lock_strategy());
        if (!lock || *lock == routine::LockStrategy::mesh_default) {
          refused(fmt::format("unknown lock strategy '{}' (sla, ola or aggressive)", request.lock_strategy()));
          return;
        }
      }
      run_combo(request, routine::adhoc_spec(spec->id, std::move(values), *lock), std::move(reply));
      return;
    }
  }
  const routine::DeviceKind kind = spec->kind;
  node_.devices().command(
      request.id(), std::move(values), request.command_id(), timeout_of(request.timeout_ms()),
      [alive = alive_, kind, reply = std::move(reply)](const auto& result) {
        if (!*alive) return;
        if (!result) {
          reply(error_response(result.error()));
          return;
        }
        proto::AdminResponse response;
        proto::DeviceSetReply& out = *response.mutable_device_set();
        out.set_command_id(result->command_id());
        out.set_status(status_name(result->outcome().status()));
        out.set_detail(result->outcome().detail());
        out.set_state_after(routine::format_attributes(kind, routine::from_proto(result->outcome().state_after())));
        reply(std::move(response));
      });
}

void AdminDevices::run_combo(const proto::DeviceSetRequest& request, routine::RoutineSpec combo, Reply reply) {
  node_.routines().run_adhoc(
      combo, request.command_id(), timeout_of(request.timeout_ms()),
      [this, alive = alive_, combo, reply = std::move(reply)](const auto& result) {
        if (!*alive) return;
        if (!result) {
          reply(error_response(
              fmt::format("{} (meshctl routine history {} follows the combo)", result.error(), combo.id)));
          return;
        }
        proto::AdminResponse response;
        proto::DeviceSetReply& out = *response.mutable_device_set();
        out.set_combo(combo.id);
        *out.mutable_invocation() = *result;
        switch (result->outcome()) {
          case proto::INVOCATION_OK:
            out.set_status("ok");
            break;
          case proto::INVOCATION_ABORTED:
            out.set_status("aborted");
            break;
          default:
            out.set_status("failed");
            break;
        }
        out.set_detail(result->detail());
        describe_combo(combo, routine::from_proto(*result), node_.catalog(), out);
        reply(std::move(response));
      });
}

void AdminDevices::watch(const proto::DeviceWatchRequest& request, Reply reply, ConnectionId connection) {
  if (connection == 0) {
    reply(error_response("device watch needs a connection of its own"));
    return;
  }
  for (const std::string& id : request.ids()) {
    if (node_.catalog().find(id) == nullptr) {
      reply(error_response(fmt::format("no device {} in the catalog (meshctl devices lists them)", id)));
      return;
    }
  }
  auto& slot = watches_[connection];
  if (!slot) {
    slot = std::make_unique<Watch>(node_.env());
    std::vector<std::string> ids(request.ids().begin(), request.ids().end());
    slot->handle = node_.device_watcher().watch(
        ids, [this, connection](const std::string& device, const routine::DeviceWatcher::Seen& seen) {
          const auto it = watches_.find(connection);
          const routine::DeviceSpec* spec = node_.catalog().find(device);
          if (it == watches_.end() || spec == nullptr) return;
          Watch& w = *it->second;
          proto::DeviceChange change;
          change.set_seq(w.next_seq++);
          *change.mutable_device() = row_of(*spec);
          fill_state(*change.mutable_device(), spec->kind, routine::to_proto(device, seen.record));
          change.mutable_device()->set_leader(seen.leader.to_string());
          w.changes.push_back(std::move(change));
          while (w.changes.size() > kMaxBufferedChanges) w.changes.pop_front();
          answer_watch(connection);
        });
    // The first answer starts from what this node already knows.
    for (const auto& [device, seen] : node_.device_watcher().view()) {
      const routine::DeviceSpec* spec = node_.catalog().find(device);
      if (spec == nullptr || (!ids.empty() && std::find(ids.begin(), ids.end(), device) == ids.end())) continue;
      proto::DeviceChange change;
      change.set_seq(slot->next_seq++);
      *change.mutable_device() = row_of(*spec);
      fill_state(*change.mutable_device(), spec->kind, routine::to_proto(device, seen.record));
      change.mutable_device()->set_leader(seen.leader.to_string());
      slot->changes.push_back(std::move(change));
    }
    core::log("agent").info("device watch started connection={} devices={}", connection,
                            ids.empty() ? std::string("all") : fmt::format("{}", fmt::join(ids, ",")));
  }
  Watch& w = *slot;
  if (w.waiting) {
    // A newer poll replaces the one still waiting, which ends empty.
    proto::AdminResponse empty;
    empty.mutable_device_watch()->set_last(w.waiting_after);
    (*w.waiting)(std::move(empty));
  }
  w.waiting = std::move(reply);
  w.waiting_after = request.after();
  w.wait_timer.start(timeout_of(std::min<uint32_t>(request.wait_ms(), 60000)),
                     [this, connection] {
                       const auto it = watches_.find(connection);
                       if (it == watches_.end() || !it->second->waiting) return;
                       proto::AdminResponse response;
                       response.mutable_device_watch()->set_last(it->second->waiting_after);
                       auto waiting = std::move(*it->second->waiting);
                       it->second->waiting.reset();
                       waiting(std::move(response));
                     });
  answer_watch(connection);
}

void AdminDevices::answer_watch(ConnectionId connection) {
  const auto it = watches_.find(connection);
  if (it == watches_.end() || !it->second->waiting) return;
  Watch& w = *it->second;
  proto::AdminResponse response;
  proto::DeviceWatchReply& out = *response.mutable_device_watch();
  uint64_t last = w.waiting_after;
  for (const auto& change : w.changes) {
    if (change.seq() <= w.waiting_after) continue;
    *out.add_changes() = change;
    last = change.seq();
  }
  if (out.changes().empty()) return;
  out.set_last(last);
  // Changes the client has seen are dropped.
  while (!w.changes.empty() && w.changes.front().seq() <= w.waiting_after) w.changes.pop_front();
  auto waiting = std::move(*w.waiting);
  w.waiting.reset();
  w.wait_timer.cancel();
  waiting(std::move(response));
}

void AdminDevices::connection_closed(ConnectionId connection) {
  const auto it = watches_.find(connection);
  if (it == watches_.end()) return;
  node_.device_watcher().unwatch(it->second->handle);
  watches_.erase(it);
  core::log("agent").info("device watch ended connection={}", connection);
}

}  // namespace mesh::agent
