#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "proto/invocation.pb.h"
#include "routine/device_model.h"
#include "routine/routine_model.h"

namespace mesh::routine {

// Ad hoc combos (apex.md §6.2-§7 for a command a user sends, not a
// routine): `meshctl device set` on a command that precondition rules apply
// to runs it as a routine of its own. The trigger carries that one-command
// routine (RoutineTrigger.adhoc), and the invocation keeps it, so its
// group's leader, the combo's pivot, drives it exactly as a catalog
// routine's invocation (routine/routine_leaders.h): locks on every device
// of its precondition graph, the plan deduced under them, the precondition
// commands in PEG order and the subject last, rollback on abort, release.
// A crash of the pivot is a leader change of the group: the next leader
// goes on from the committed state, so every combo ends committed or
// rolled back.
//
// Its group is "routine:adhoc:DEVICE", one per subject device. A catalog
// routine id cannot hold ':' (check_routine_id), so no routine shares it;
// device ids cannot hold '#', so the lock holder "adhoc:DEVICE#SEQ.TAG"
// still names its group for wound-wait and lock reclaim. The group is
// created by the first write to it (k-group genesis), so devices nobody
// sets by hand have none; combos on one subject are ordered in one group.

inline constexpr std::string_view kAdhocRoutinePrefix = "adhoc:";

// "adhoc:DEVICE": the routine id (and group id) of ad hoc combos on `device`.
std::string adhoc_routine_id(std::string_view device);
// Whether `routine` is an ad hoc combo's id rather than a catalog routine's.
bool is_adhoc_routine(std::string_view routine);

// The routine an ad hoc combo runs: id adhoc_routine_id(device), manual,
// one must command setting `values` on `device`, with `lock` (mesh_default:
// the mesh's strategy).
RoutineSpec adhoc_spec(const std::string& device, Attributes values, LockStrategy lock);

// Conversions with the form the trigger and the group's snapshot carry.
// to_adhoc_proto takes an adhoc_spec. The decoder rejects a bad device id,
// no value or one set twice, and an unknown lock strategy.
proto::AdhocCommandMsg to_adhoc_proto(const RoutineSpec& spec);
core::Expected<RoutineSpec, std::string> adhoc_from_proto(const proto::AdhocCommandMsg& msg);

}  // namespace mesh::routine
