#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/kgroup_service.h"
#include "core/env.h"
#include "core/expected.h"
#include "core/metrics.h"
#include "membership/member_view.h"
#include "proto/routine.pb.h"
#include "routine/catalog.h"
#include "routine/device_model.h"

namespace mesh::agent {

struct DeviceServiceOptions {
  // A command's client waits this long for its outcome unless told otherwise.
  core::Duration command_timeout = std::chrono::seconds(10);
  // While waiting, it asks the device's leader for the outcome this often.
  core::Duration outcome_poll = std::chrono::milliseconds(200);
  // How often this node creates the device and routine groups it is the preferred
  // leader of and that do not exist yet.
  core::Duration ensure_interval = std::chrono::seconds(2);
  // ...but only once the group's selected members have stayed the same for
  // this long: nodes whose views still disagree would each see themselves as
  // the preferred leader and create the same group twice. Per group, not per
  // member list: a crash or restart elsewhere in the mesh must not hold back
  // a group whose members it does not change (a device moved into a new
  // cluster during a restart stayed leaderless past its failover bound).
  core::Duration ensure_quiet = std::chrono::seconds(10);
};

// The agent's client side of devices: catalog changes and device commands
// accepted from meshctl (or a routine, later) on any node, and reads of the
// device groups' state. Every request is routed to the right group's leader
// by KgroupService (redirects, retries, exactly-once write ids).
//
// A command is accepted by a write (CommandAccept, its id making a retried
// write harmless), then its outcome is read from the device leader until it
// is final or the timeout passes; the device leaders (routine/
// device_leaders.h) do the rest. A catalog change is a write to the
// catalog's group; its verdict (accepted, or refused and why) is read back
// at the version it was given.
class DeviceService {
 public:
  using CatalogCallback = std::function<void(const core::Expected<proto::CatalogEntry, std::string>& result)>;
  using CommandCallback = std::function<void(const core::Expected<proto::CommandRecordMsg, std::string>& result)>;
  struct GroupRead {
    std::string group;
    core::NodeId leader;
    std::optional<std::string> error;
    std::vector<proto::DeviceStateMsg> devices;
  };
  using DevicesCallback = std::function<void(const std::vector<GroupRead>& groups)>;

  static inline const kgroup::GroupTarget kCatalogTarget{kgroup::TargetKind::catalog, "mesh"};

  DeviceService(core::Env& env, core::NodeId self, KgroupService& kgroups, const membership::MemberView& view,
                const routine::Catalog& catalog, core::Metrics& metrics, DeviceServiceOptions options);
  DeviceService(const DeviceService&) = delete;
  DeviceService& operator=(const DeviceService&) = delete;
  ~DeviceService();

  void start();

  // Puts or removes a catalog device; checked here first against this
  // node's catalog (the file included), then decided by the catalog group.
  void change_catalog(proto::CatalogChange change, core::Duration timeout, CatalogCallback callback);
  // Runs a command; an empty command_id gets a fresh one. The callback gets
  // the final record (its outcome says ok, refused, down, ...) or, if none
  // arrived in time, an error.
  void command(const std::string& device, routine::Attributes values, std::string command_id, core::Duration timeout,
               CommandCallback callback);
  // Reads every device group's state through its leader.
  void read_devices(core::Duration timeout, DevicesCallback callback);

 private:
  struct PendingCommand;
  void ensure_groups();
  void poll_outcome(uint64_t id);
  void finish_command(uint64_t id, const core::Expected<proto::CommandRecordMsg, std::string>& result);

  core::Env& env_;
  core::NodeId self_;
  KgroupService& kgroups_;
  const membership::MemberView& view_;
  const routine::Catalog& catalog_;
  DeviceServiceOptions options_;
  core::ScopedTimer ensure_timer_;
  std::set<std::string> ensuring_;
  // Each missing group's members as this node last selected them, and since when.
  struct StableSelection {
    std::vector<core::NodeId> members;
    core::TimePoint since;
  };
  std::map<std::string, StableSelection> missing_groups_;
  std::map<uint64_t, std::unique_ptr<PendingCommand>> commands_;
  uint64_t next_command_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  core::Counter& commands_ok_;
  core::Counter& commands_failed_;
};

}  // namespace mesh::agent
