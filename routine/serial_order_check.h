#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/time.h"
#include "routine/routine_schedule.h"

namespace mesh::routine {

// What happened to a device, as its log records it.
enum class ActuationKind {
  command,   // an invocation's command
  rollback,  // an aborted invocation undoing its command
  failure,   // the device was detected failed (safehome.md §3)
  restart,   // the device was detected back
};

struct Actuation {
  std::string device;
  core::TimePoint at{};
  ActuationKind kind = ActuationKind::command;
  InvocationId invocation = 0;  // command and rollback
  // The state it left the device in; none: the state did not change (a
  // failure or restart that keeps it).
  std::optional<std::string> value;
};

// Everything the check looks at. Values are opaque states ("on", "21.5");
// a device is anything written as a whole (callers that write a device's
// attributes separately name each one as its own device).
struct ExecutionRecord {
  std::vector<Actuation> actuations;  // any order; per device ordered by time, then as listed
  std::set<InvocationId> committed;
  std::set<InvocationId> aborted;
  // What each committed invocation leaves on each device it writes.
  std::map<InvocationId, std::map<std::string, std::string>> intended_writes;
  std::map<std::string, std::string> initial_state;
};

struct SerialCheckOptions {
  // EV's rollback rule (§4.3): an aborted invocation's write need not be
  // undone when a later write overwrote it (a command or rollback of
  // another invocation, or a device event).
  // Off: every write of an aborted invocation must be rolled back.
  bool overwrite_excuses_rollback = false;
};

// The serializability oracle (safehome.md §2.1 and §3: the end state must
// be that of some serial order of the committed routines and the device
// failure and restart events; aborted routines appear in no order).
//
// Items are the committed invocations and the failure and restart events;
// on each device, an item whose actuation comes before another's is
// serialized before it. A serial order consistent with all of those exists
// exactly when the resulting precedence graph is acyclic, and then every
// topological order puts the same item last on each device (the item of the
// device's last actuation is after every other one there), so they all
// have the same end state. Checks, all reported, one line each:
//  - every actuation's invocation is committed or aborted, not both, and
//    committed ones roll nothing back;
//  - every committed invocation wrote each device it intends to, its last
//    write there being the intended value, and wrote nothing else;
//  - the precedence graph is acyclic (else one cycle, with the device and
//    times that ordered each pair);
//  - if so, each device's end state (its last valued actuation, else its
//    initial state) equals that of the serial order, except a device whose
//    log ends with a failure no restart followed;
//  - no aborted invocation's write survives: each is followed by its own
//    rollback on that device (or, with overwrite_excuses_rollback, by any
//    later valued actuation of a committed invocation or event), unless the
//    device failed after it and never restarted (a dead device cannot be
//    rolled back; its state no longer shows). The end state check above
//    still judges what the overwriting left.
// Returns nothing when all hold, else the problems in that order.
std::optional<std::string> check_serial_order(const ExecutionRecord& record, SerialCheckOptions options = {});

// When an invocation was executing: from its first actuation to its end
// (commit or abort), and the devices it locks.
struct ExecutionSpan {
  InvocationId invocation = 0;
  core::TimePoint first_actuation{};
  core::TimePoint end{};
  std::set<std::string> devices;
};

// GSV (§2.1): never two invocations executing at once. Spans are half open,
// so one may start the instant another ends. Names the first overlapping
// pair found in start order.
std::optional<std::string> check_global_strict(const std::vector<ExecutionSpan>& spans);
// PSV (§2.1): never two invocations that share a device executing at once.
std::optional<std::string> check_partitioned_strict(const std::vector<ExecutionSpan>& spans);

}  // namespace mesh::routine
