#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/node_id.h"
#include "kgroup/client_state_machine.h"
#include "proto/routine.pb.h"
#include "routine/device_locks.h"
#include "routine/device_model.h"

namespace mesh::routine {

// What a device group ("cluster:ID") replicates for each of its devices:
// the latest observed state and up/down status with a version, and the
// commands sent to them with their progress. A new device leader (after a
// crash, an election or a migration) starts from exactly this.
//
// A command goes through three committed steps: accepted (a client's write,
// exactly once by command id), actuating (the leader is about to actuate;
// written before it does, so a successor knows the command may have been
// applied and reports it interrupted instead of actuating it again), and its
// outcome. So across leader changes a command is actuated at most once, and
// an accepted command is never dropped: it ends with an outcome.
//
// The group also holds its devices' locks (DeviceLocks). The actuating step
// is where locks are enforced: applied while the device is locked, it is
// refused unless the command carries the current holder's fencing token, so
// a command with no lock cannot cut into a routine, and a routine whose lock
// was reclaimed cannot actuate after the next holder was granted it.
class DeviceGroupState : public kgroup::ClientStateMachine {
 public:
  struct Device {
    Attributes attributes;
    uint64_t version = 0;  // bumped by every change of attributes or up/down
    bool known = false;    // observed at least once
    bool up = false;
    std::string reason;  // why it is down
    int64_t changed_at_us = 0;
  };
  struct Command {
    std::string id;
    std::string device;
    Attributes values;
    core::NodeId origin;
    // A routine's command: the lock it was sent under (DeviceLocks).
    std::string lock_holder;
    uint64_t lock_token = 0;
    uint64_t accepted_position = 0;
    bool actuating = false;
    proto::CommandOutcome outcome;  // status COMMAND_PENDING until done
    bool done() const { return outcome.status() != proto::COMMAND_PENDING; }
  };

  // Payloads of the updates (wrapped by ClientStateMachine::encode_write).
  static std::string encode(const proto::DeviceUpdate& update) { return update.SerializeAsString(); }

  void apply(uint64_t seq, std::string_view update) override;
  std::string snapshot() const override;
  bool restore(std::string_view snapshot) override;
  std::optional<uint64_t> position_of(uint64_t group_seq) const override;
  // Query: a proto::DeviceQuery; answer: a proto::DeviceQueryReply.
  core::Expected<std::string, std::string> read(std::string_view query) const override;

  const std::map<std::string, Device>& devices() const { return devices_; }
  const Device* device(const std::string& id) const;
  const Command* command(const std::string& id) const;
  const DeviceLocks& locks() const { return locks_; }
  // Commands without an outcome, in the order they were accepted.
  std::vector<const Command*> pending() const;
  uint64_t position() const { return position_; }
  // Called after every applied update (from inside the replica: defer work).
  void set_on_apply(std::function<void()> callback) { on_apply_ = std::move(callback); }

  // Finished commands remembered for their clients and against retried
  // accepts (oldest forgotten first). Bounded because the whole state moves
  // at every leader change and migration (about 100 bytes a command): a
  // client's retries end with its timeout (10 s by default), and no device
  // group sees 128 commands within one timeout in a building.
  static constexpr size_t kMaxFinishedCommands = 128;

 private:
  void apply_update(std::string_view update);
  // The fencing check of a command about to be actuated: why it must not
  // be, given the device's lock now, or nothing.
  std::optional<std::string> lock_refusal(const Command& command) const;
  void finish(Command& command, proto::CommandStatus status, std::string detail);
  void forget_old_commands();

  std::map<std::string, Device> devices_;
  std::map<std::string, Command> commands_;
  std::deque<std::string> finished_order_;
  DeviceLocks locks_;
  uint64_t position_ = 0;
  std::map<uint64_t, uint64_t> position_by_group_seq_;
  std::function<void()> on_apply_;
};

proto::DeviceStateMsg to_proto(const std::string& id, const DeviceGroupState::Device& device);
DeviceGroupState::Device from_proto(const proto::DeviceStateMsg& msg);
proto::CommandRecordMsg to_proto(const DeviceGroupState::Command& command);

}  // namespace mesh::routine
