#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kgroup/client_state_machine.h"
#include "proto/invocation.pb.h"
#include "routine/device_model.h"
#include "routine/failure_serialization.h"
#include "routine/routine_combo.h"
#include "routine/routine_model.h"

namespace mesh::routine {

// What a routine's group ("routine:ID") replicates: the routine's
// invocations, each with its phase (CoMesh 4.2: NOT_TRIGGERED ->
// ACQUIRING_LOCKS -> EXECUTING -> RELEASING_LOCKS, then done) and its
// progress: the locks it holds with their fencing tokens, each command's
// outcome, and when each phase began. The routine leader commits every
// transition here before acting on it, so a new leader (crash, election,
// epoch migration) continues each invocation from exactly this:
//
//  - an invocation exists once its trigger is committed, and is then driven
//    to its end by whoever leads the group: no lost invocation;
//  - its commands are sent to device groups under ids derived from
//    (routine, sequence number, index), which the device group accepts
//    once; a new leader resends a command whose outcome is not recorded
//    here, and the device group answers with the first one's outcome: no
//    command actuated twice;
//  - an invocation ends only after its releases were committed by every
//    device group it locked: no lock leaked (and a holder gone for good is
//    reclaimed by the device leader);
//  - an invocation that lost a lock or resource is stopped (a committed
//    `stop` with the reason): no later command of it is sent;
//  - an invocation whose must command failed is aborted (a committed
//    `abort` with the reason): no later command of it is sent, and the
//    commands that ran are undone newest first, each undo's outcome
//    committed (`undo`) before the next, so a new leader resumes the
//    rollback where it stood and never undoes a command twice;
//  - an invocation whose routine has precondition rules commits its plan
//    (the precondition commands, deduced once its locks are held) before
//    its first command, so every leader runs the same combo;
//  - under GSV and S-GSV an invocation commits the failure and restart
//    event counts of the devices it watches (`baseline`) before its plan
//    and first command, so whichever leader reaches its finish point
//    compares against the same start (routine/failure_serialization.h).
//
// Steps apply only if they move an invocation forward (a repeated or
// late step changes nothing), so a deposed leader's stale write is harmless.
class RoutineGroupState : public kgroup::ClientStateMachine {
 public:
  struct CommandResult {
    proto::CommandStatus status = proto::COMMAND_PENDING;
    std::string detail;
    int64_t done_at_us = 0;
    int64_t started_at_us = 0;  // CommandStep.started_at_us (0: not known)
    // The device's values before the command: what undoing it restores.
    Attributes state_before;
    // The device's failure and restart events before the command began
    // actuating (routine/failure_serialization.h); none if it never did.
    std::optional<uint64_t> availability_events;
  };
  // A resource taken with Camera: its grant lives at one node (`holder`),
  // so only that node can go on using it (routine/routine_leaders.h).
  struct ResourceGrant {
    uint64_t token = 0;
    uint32_t holder = 0;  // NodeId value
    bool for_rollback = false;  // taken again to roll back (ResourceHeldStep.for_rollback)
    int64_t taken_at_us = 0;    // when committed (the step's at_us; 0: not known)
    bool operator==(const ResourceGrant&) const = default;
  };
  struct Invocation {
    uint64_t seq = 0;
    uint32_t tag = 0;
    std::string request_id;
    bool manual = false;
    uint64_t definition = 0;
    // An ad hoc combo's own one-command routine (routine/adhoc_combo.h),
    // which it runs instead of a catalog routine's definition.
    std::optional<RoutineSpec> adhoc;
    proto::RoutinePhase phase = proto::PHASE_ACQUIRING_LOCKS;
    proto::InvocationOutcome outcome = proto::INVOCATION_RUNNING;
    std::string detail;
    std::map<std::string, uint64_t> locks;  // device -> fencing token
    // What its lock requests name, from 1 (routine/device_locks.h,
    // "Rounds"): raised by a committed step each time it gives its locks
    // back to take them again, so a release sent then and delivered late
    // cannot take what it is granted afterwards.
    uint32_t lock_round = 1;
    // EV: locks given up after their device's last command (post-lease),
    // device -> the token it held; moved here from `locks`.
    std::map<std::string, uint64_t> leased;
    std::map<std::string, ResourceGrant> resources;  // resource (RoutineSpec::uses) -> its Camera grant
    std::string stop_reason;  // non-empty: stopped because a lock or resource was lost
    std::map<uint32_t, CommandResult> commands;
    std::string abort_reason;  // non-empty: a must command failed; what ran is being undone
    std::map<uint32_t, CommandResult> undone;  // command index -> the outcome of undoing it
    // Set once its precondition commands were deduced (APEX,
    // routine/routine_combo.h); command indexes then count them too.
    std::optional<std::vector<PreconditionCommand>> plan;
    // Aggressive strategy: the routine commands whose precondition commands
    // `plan` holds so far (each stage is planned when it is reached); 0
    // with a plan: it is the whole routine's (conservative).
    uint32_t planned_stages = 0;
    // Another invocation waits for `device`, which this (aggressive) one
    // holds (APEX wound-wait, routine/routine_leaders.h): while acquiring,
    // or executing with nothing run yet (may_yield), it gives every lock
    // back and then clears the wound (`wound_yielded`, which also drops a
    // plan made under those locks); once a command ran, it aborts.
    struct Wound {
      std::string device;
      uint64_t token = 0;
      std::string by;
      int64_t by_started_us = 0;
    };
    std::optional<Wound> wound;
    // A rollback waits for a resource this invocation holds, while holding
    // devices (proto::MakeWay): if this invocation waits for one of them,
    // it gives the resource back (routine/routine_leaders.h). Cleared when
    // the resource is dropped.
    struct MakeWay {
      std::string resource;
      std::string by;
      std::set<std::string> devices;
    };
    std::optional<MakeWay> make_way;
    // GSV, S-GSV: the watched devices' event counts at the start of
    // EXECUTING, committed before the plan and the first command.
    std::optional<AvailabilityBaseline> baseline;
    // EV (routine/routine_leaders.h, "Serial keys"): its place in the
    // serial order, committed before it is placed in its devices'
    // lineages; `placed_at_us` is set once every lineage took it (then it
    // may run commands), and a refusal re-keys it (placements start over).
    int64_t serial_key_us = 0;
    int64_t keyed_at_us = 0;
    int64_t placed_at_us = 0;
    uint32_t rekeys = 0;
    int64_t triggered_at_us = 0;
    int64_t locked_at_us = 0;
    int64_t releasing_at_us = 0;
    int64_t ended_at_us = 0;
    bool done() const { return phase == proto::PHASE_DONE; }
    // Executing, yet nothing ran: it may still give its locks back and take
    // them again (an aggressive invocation wounded before its first
    // command); a plan made under those locks is dropped when it does.
    bool may_yield() const { return phase == proto::PHASE_EXECUTING && commands.empty() && abort_reason.empty(); }
  };

  static std::string encode(const proto::RoutineUpdate& update) { return update.SerializeAsString(); }

  void apply(uint64_t seq, std::string_view update) override;
  std::string snapshot() const override;
  bool restore(std::string_view snapshot) override;
  // Counts applied updates (a manual run's client finds its invocation by
  // request id, RoutineQuery).
  std::optional<uint64_t> position_of(uint64_t group_seq) const override;
  // Query: a proto::RoutineQuery; answer: a proto::RoutineQueryReply.
  core::Expected<std::string, std::string> read(std::string_view query) const override;
  // While an unfinished invocation holds a Camera grant: the grant lives at
  // the leading node, and a successor led by another node would have to
  // abort the invocation and take the resource again to roll it back,
  // behind whoever waits for it (morning benchmark, GSV seed 4).
  std::optional<std::string> migration_unwelcome() const override;

  const std::map<uint64_t, Invocation>& invocations() const { return invocations_; }
  const Invocation* invocation(uint64_t seq) const;
  int64_t last_trigger_at_us() const { return last_trigger_at_us_; }
  // The version of `device` that last caused a trigger (0: none).
  uint64_t cause_version(const std::string& device) const;
  void set_on_apply(std::function<void()> callback) { on_apply_ = std::move(callback); }

  // Finished invocations kept for `meshctl routine history` (oldest
  // forgotten first); the whole state moves at every migration.
  static constexpr size_t kMaxFinished = 32;
  // A read's answer travels in one datagram (core::Link's 1400 bytes, less
  // the envelope, its authentication and the group's framing): the running
  // invocations and then the newest finished ones that fit this many bytes.
  static constexpr size_t kMaxAnswerBytes = 800;

 private:
  void apply_update(std::string_view update);
  void apply_trigger(const proto::RoutineTrigger& trigger);
  void apply_make_way(const proto::MakeWay& make_way);
  void apply_step(const proto::InvocationStep& step);
  static void hold_lock(Invocation& invocation, const proto::LockHeldStep& lock);

  std::map<uint64_t, Invocation> invocations_;
  std::deque<uint64_t> finished_order_;
  uint64_t next_seq_ = 1;
  int64_t last_trigger_at_us_ = 0;
  std::map<std::string, uint64_t> cause_versions_;
  uint64_t position_ = 0;
  std::map<uint64_t, uint64_t> position_by_group_seq_;
  std::function<void()> on_apply_;
};

// "ROUTINE#SEQ.TAG": how device locks and command ids name one invocation
// (the tag, hex, tells apart the invocations of twin groups of a routine).
std::string holder_name(const std::string& routine, const RoutineGroupState::Invocation& invocation);
// "ROUTINE#SEQ.TAG#INDEX"
std::string command_id(const std::string& routine, const RoutineGroupState::Invocation& invocation,
                       uint32_t index);
// "ROUTINE#SEQ.TAG#INDEX.undo": the command that undoes command INDEX.
std::string undo_command_id(const std::string& routine, const RoutineGroupState::Invocation& invocation,
                            uint32_t index);

proto::InvocationMsg to_proto(const RoutineGroupState::Invocation& invocation);
// An ad hoc command that does not decode is left out (restore() refuses
// such a snapshot; a reader shows the invocation without it).
RoutineGroupState::Invocation from_proto(const proto::InvocationMsg& msg);

}  // namespace mesh::routine
