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
// Handoff: a catalog change can move a device to another group (its cluster
// changed). The new group's leader writes DeviceHandoff{device, to,
// at_version} to the old group, reads the device's record and newest
// finished commands there, and commits them here with DeviceImport (the
// finished commands in as many imports as the update size needs, the record
// last). Both are applied from their payload alone, so every replica of
// either group decides the same. Why it is safe:
//  - Freezing is the old group's last word on the device: when the handoff
//    applies, its pending commands are refused ("moved to cluster:X"), an
//    actuating one is reported interrupted (as on a leader change), later
//    accepts are refused at once, and observations and outcomes are
//    ignored. So after the freeze nothing is actuated there any more (one
//    driver call already under way when it applies may still land: the
//    command is reported interrupted, as when a leader dies mid-call), and
//    the record and command ids the new group reads are final.
//  - The new group's leader neither polls nor actuates the device before its
//    last import commits, so no command runs in both groups; an imported
//    command id answers a retried accept here as it did there; a command
//    accepted here meanwhile under an id the old group may have actuated
//    takes the old outcome instead of running again. Hence at most once
//    across the move. Nothing acknowledged is lost: an outcome stays in the
//    old group, where its client polls it, and every command accepted there
//    ends with one (run, refused as moved, or interrupted).
//  - What moves: the record whole, and of the command history the device's
//    newest finished commands that fit one read answer
//    (kHandoffHistoryBytes), id and outcome only: all a retried accept
//    needs, and retries end with the client's timeout.
//  - Versions order the claims. at_version / placed_version is the catalog
//    version from which the device is in the claiming group; at one version
//    a device is in exactly one cluster, so two groups never claim with the
//    same version. A freeze older than the record's placement is ignored (a
//    leader with a stale catalog cannot take a device back); an import older
//    than a freeze is ignored (a freeze that overtook a slower importer
//    wins, so at most one group holds the device live). A freeze of a device
//    the group never held leaves a tombstone that still rejects older
//    imports.
//  - Every step is idempotent (commands by id, the record by placement), so
//    a new leader on either side simply redoes the handoff. The imported
//    record keeps its version (and stays above this group's own older
//    record), so subscribers never see a version go backwards.
class DeviceGroupState : public kgroup::ClientStateMachine {
 public:
  struct Device {
    Attributes attributes;
    uint64_t version = 0;  // bumped by every change of attributes or up/down
    bool known = false;    // observed at least once
    bool up = false;
    std::string reason;  // why it is down
    int64_t changed_at_us = 0;
    // Failure and restart events committed here (a known device's up turning
    // to down or back, by an observation or an ok command), carried across
    // handoffs and never going back: routines place these events among
    // their commands by it (routine/failure_serialization.h).
    uint64_t availability_events = 0;
    // Attribute -> the lock holder of the last command that began actuating
    // it (empty: one without a lock); what an EV undo after a post-lease
    // may still restore (restore_after_lease).
    std::map<std::string, std::string> attribute_writers;
    // Handoff: this group holds the device's record (observed, commanded or
    // imported here), live from catalog version placed_version; frozen (no
    // longer this group's) when moved_to is set, by a claim of
    // frozen_for_version.
    bool held = false;
    uint64_t placed_version = 0;
    std::string moved_to;
    uint64_t frozen_for_version = 0;
    bool frozen() const { return !moved_to.empty(); }
  };
  struct Command {
    std::string id;
    std::string device;
    Attributes values;
    core::NodeId origin;
    // A routine's command: the lock it was sent under (DeviceLocks).
    std::string lock_holder;
    uint64_t lock_token = 0;
    // EV: an undo sent after its routine gave the device's lock up
    // (CommandAccept.after_lease).
    bool after_lease = false;
    uint64_t accepted_position = 0;
    bool actuating = false;
    // When it began actuating (0: never): the order in which commands wrote
    // the device. Not accepted_position: a command sent first may begin
    // actuating later, and one refused before actuating wrote nothing.
    uint64_t actuated_position = 0;
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
  // A handoff read carries the device's newest finished commands that fit
  // this many bytes, without their values and state after and with their
  // detail cut to kHandoffDetailBytes: a retried accept needs only the id
  // and its outcome, and one answer must fit one datagram. Retries end
  // with the client's timeout, so the newest few are the ones that matter.
  static constexpr size_t kHandoffHistoryBytes = 560;
  static constexpr size_t kHandoffDetailBytes = 64;

 private:
  void apply_update(std::string_view update);
  // Copies what this group knows of the command's attributes into its
  // outcome's state_before, and makes its lock holder their last writer, as
  // the command begins actuating.
  void record_state_before(Command& command);
  // The fencing check of a command about to be actuated: why it must not
  // be, given the device's lock now, or nothing.
  std::optional<std::string> lock_refusal(const Command& command) const;
  // An EV undo after a post-lease, as it is about to be actuated: keeps
  // only the attributes its routine still wrote last and, for each of the
  // others, hands its value to the first later command that overwrote it
  // (as that command's state before: if that routine aborts too, its
  // rollback restores what this routine's rollback would have). Why it
  // must not be actuated at all (nothing is left to restore), or nothing.
  std::optional<std::string> restore_after_lease(Command& undo);
  void hand_over_undo_value(const Command& undo, const std::string& attribute, const Value& value);
  // "routine invocation X" (or "a command without a lock") for the last
  // writers of these attributes of the device.
  std::string last_writers(const std::string& device, const std::vector<std::string>& attributes) const;
  void finish(Command& command, proto::CommandStatus status, std::string detail);
  void forget_old_commands();
  void apply_handoff(const proto::DeviceHandoff& handoff);
  void apply_import(const proto::DeviceImport& imported);
  proto::DeviceQueryReply handoff_answer(const std::string& device) const;

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
