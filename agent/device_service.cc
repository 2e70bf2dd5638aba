#include "agent/device_service.h"

#include <fmt/format.h>

#include "core/log.h"
#include "proto/invocation.pb.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"

namespace mesh::agent {

struct DeviceService::PendingCommand {
  explicit PendingCommand(core::Env& env) : poll_timer(env), deadline_timer(env) {}
  std::string command_id;
  kgroup::GroupTarget target;
  core::TimePoint deadline;
  CommandCallback callback;
  std::string last_problem;
  core::ScopedTimer poll_timer;
  core::ScopedTimer deadline_timer;
};

DeviceService::DeviceService(core::Env& env, core::NodeId self, KgroupService& kgroups,
                             const membership::MemberView& view, const routine::Catalog& catalog,
                             core::Metrics& metrics, DeviceServiceOptions options)
    : env_(env),
      self_(self),
      kgroups_(kgroups),
      view_(view),
      catalog_(catalog),
      options_(options),
      ensure_timer_(env),
      commands_ok_(metrics.counter("device_client_commands_total", {{"result", "ok"}})),
      commands_failed_(metrics.counter("device_client_commands_total", {{"result", "failed"}})) {}

DeviceService::~DeviceService() { *alive_ = false; }

void DeviceService::start() {
  ensure_timer_.start_periodic(options_.ensure_interval, [this] { ensure_groups(); });
}

void DeviceService::ensure_groups() {
  // Device and routine groups must exist before anyone writes to them:
  // their leaders watch the devices and the routines' triggers. The preferred leader of a missing group creates it
  // with an empty write (KgroupService runs genesis, which first asks every
  // live node whether the group exists somewhere already).
  // A node that sees no other member (just booted, or cut off) would create
  // groups of itself alone; a mesh of one node (k = 1) is the exception.
  if (view_.live_count() < std::min<size_t>(kgroups_.config().selection.k, 2)) return;
  // Each group is created by an update that changes nothing in its state.
  std::map<std::string, std::string> targets;
  proto::DeviceUpdate device_hello;
  device_hello.set_hello(true);
  for (const auto& [id, spec] : catalog_.devices()) {
    targets[kgroups_.selector().device_group(id).to_string()] = device_hello.SerializeAsString();
  }
  proto::RoutineUpdate routine_hello;
  routine_hello.set_hello(true);
  for (const auto& [id, spec] : catalog_.routines()) {
    targets[kgroup::GroupTarget{kgroup::TargetKind::routine, id}.to_string()] = routine_hello.SerializeAsString();
  }
  const core::TimePoint now = env_.now();
  std::map<std::string, StableSelection> still_missing;
  for (const auto& entry : targets) {
    const std::string& key = entry.first;
    const std::string& hello = entry.second;
    const auto target = kgroup::GroupTarget::parse(key);
    if (!target || ensuring_.count(key) != 0 || kgroups_.host().latest(key) != nullptr) continue;
    std::vector<core::NodeId> members;
    for (const auto& member : kgroups_.select(*target).members) members.push_back(member.id);
    const auto seen = missing_groups_.find(key);
    StableSelection& selection = still_missing[key];
    selection.members = std::move(members);
    selection.since = seen != missing_groups_.end() && seen->second.members == selection.members ? seen->second.since : now;
    if (now - selection.since < options_.ensure_quiet) continue;
    if (selection.members.empty() || selection.members.front() != self_) continue;
    ensuring_.insert(key);
    kgroups_.write(*target, hello, options_.ensure_interval * 5, [this, alive = alive_, key](const auto& result) {
      if (!*alive) return;
      ensuring_.erase(key);
      if (result) core::log("routine").info("group {} ready", key);
    });
  }
  missing_groups_ = std::move(still_missing);
}

void DeviceService::change_catalog(proto::CatalogChange change, core::Duration timeout, CatalogCallback callback) {
  if (auto problem = routine::check_change(catalog_, change)) {
    callback(core::Unexpected(*problem));
    return;
  }
  if (change.change_id() == 0) change.set_change_id(env_.rng().next_u64() | 1);
  if (timeout <= core::Duration::zero()) timeout = options_.command_timeout;
  const core::TimePoint deadline = env_.now() + timeout;
  kgroups_.write(
      kCatalogTarget, change.SerializeAsString(), timeout,
      [this, alive = alive_, deadline, callback = std::move(callback)](const auto& written) mutable {
        if (!*alive) return;
        if (!written) {
          callback(core::Unexpected(written.error()));
          return;
        }
        const uint64_t version = written->seq;
        kgroups_.read(kCatalogTarget, std::to_string(version), deadline - env_.now(),
                      [alive, version, callback = std::move(callback)](const auto& read) {
                        if (!*alive) return;
                        if (!read) {
                          callback(core::Unexpected(fmt::format(
                              "committed as catalog version {}, but its verdict could not be read: {}", version,
                              read.error())));
                          return;
                        }
                        auto entry = routine::parse_message<proto::CatalogEntry>(read->answer);
                        if (!entry) {
                          callback(core::Unexpected(std::string("malformed catalog entry from the catalog group")));
                          return;
                        }
                        callback(std::move(*entry));
                      });
      });
}

void DeviceService::command(const std::string& device, routine::Attributes values, std::string command_id,
                            core::Duration timeout, CommandCallback callback) {
  const routine::DeviceSpec* spec = catalog_.find(device);
  if (spec == nullptr) {
    callback(core::Unexpected(fmt::format("no device {} in the catalog (meshctl devices lists them)", device)));
    return;
  }
  if (auto problem = routine::check_command(*spec, values)) {
    callback(core::Unexpected(*problem));
    return;
  }
  if (command_id.empty()) command_id = fmt::format("{}-{:016x}", self_.to_string(), env_.rng().next_u64());
  if (timeout <= core::Duration::zero()) timeout = options_.command_timeout;
  const uint64_t id = next_command_++;
  auto pending = std::make_unique<PendingCommand>(env_);
  pending->command_id = command_id;
  pending->target = kgroups_.selector().device_group(device);
  pending->deadline = env_.now() + timeout;
  pending->callback = std::move(callback);
  pending->deadline_timer.start(timeout, [this, id, timeout] {
    const auto it = commands_.find(id);
    if (it == commands_.end()) return;
    finish_command(id, core::Unexpected(fmt::format(
                           "command {} has no outcome after {:.1f} s (last: {}); it may still run",
                           it->second->command_id, core::to_seconds(timeout),
                           it->second->last_problem.empty() ? "no answer" : it->second->last_problem)));
  });
  proto::DeviceUpdate update;
  proto::CommandAccept& accept = *update.mutable_accept();
  accept.set_command_id(command_id);
  accept.set_device(device);
  routine::to_proto(values, *accept.mutable_values());
  accept.set_origin(self_.value());
  const kgroup::GroupTarget target = pending->target;
  commands_[id] = std::move(pending);
  kgroups_.write(target, update.SerializeAsString(), timeout, [this, alive = alive_, id](const auto& written) {
    if (!*alive) return;
    const auto it = commands_.find(id);
    if (it == commands_.end()) return;
    if (!written) {
      finish_command(id, core::Unexpected(fmt::format("not accepted: {}", written.error())));
      return;
    }
    poll_outcome(id);
  });
}

void DeviceService::poll_outcome(uint64_t id) {
  const auto it = commands_.find(id);
  if (it == commands_.end()) return;
  PendingCommand& pending = *it->second;
  proto::DeviceQuery query;
  query.set_command_id(pending.command_id);
  kgroups_.read(pending.target, query.SerializeAsString(), pending.deadline - env_.now(),
                [this, alive = alive_, id](const auto& read) {
                  if (!*alive) return;
                  const auto found = commands_.find(id);
                  if (found == commands_.end()) return;
                  PendingCommand& p = *found->second;
                  if (read) {
                    const auto reply = routine::parse_message<proto::DeviceQueryReply>(read->answer);
                    if (reply && reply->found() && reply->command().outcome().status() != proto::COMMAND_PENDING) {
                      finish_command(id, reply->command());
                      return;
                    }
                    p.last_problem = reply && reply->found()
                                         ? (reply->command().actuating() ? "actuating" : "waiting for its device leader")
                                         : "the leader does not know the command (yet)";
                  } else {
                    p.last_problem = read.error();
                  }
                  p.poll_timer.start(options_.outcome_poll, [this, id] { poll_outcome(id); });
                });
}

void DeviceService::finish_command(uint64_t id, const core::Expected<proto::CommandRecordMsg, std::string>& result) {
  const auto it = commands_.find(id);
  if (it == commands_.end()) return;
  std::unique_ptr<PendingCommand> pending = std::move(it->second);
  commands_.erase(it);
  (result && result->outcome().status() == proto::COMMAND_OK ? commands_ok_ : commands_failed_).add();
  pending->callback(result);
}

void DeviceService::read_devices(core::Duration timeout, DevicesCallback callback) {
  std::set<std::string> targets;
  for (const auto& [id, spec] : catalog_.devices()) targets.insert(kgroups_.selector().device_group(id).to_string());
  struct Gather {
    std::vector<GroupRead> groups;
    size_t awaiting = 0;
    DevicesCallback callback;
  };
  auto gather = std::make_shared<Gather>();
  gather->callback = std::move(callback);
  gather->awaiting = targets.size();
  if (targets.empty()) {
    gather->callback({});
    return;
  }
  proto::DeviceQuery query;
  query.set_all_devices(true);
  const std::string bytes = query.SerializeAsString();
  for (const std::string& key : targets) {
    const auto target = kgroup::GroupTarget::parse(key);
    kgroups_.read(*target, bytes, timeout, [alive = alive_, gather, key](const auto& read) {
      if (!*alive) return;
      GroupRead group;
      group.group = key;
      if (!read) {
        group.error = read.error();
      } else if (auto reply = routine::parse_message<proto::DeviceQueryReply>(read->answer)) {
        group.leader = read->leader;
        group.devices.assign(reply->devices().begin(), reply->devices().end());
      } else {
        group.error = "malformed answer";
      }
      gather->groups.push_back(std::move(group));
      if (--gather->awaiting == 0) gather->callback(gather->groups);
    });
  }
}

}  // namespace mesh::agent
