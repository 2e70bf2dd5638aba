#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/invocation.pb.h"
#include "routine/visibility.h"

namespace mesh::routine {

// Failure serialization (SafeHome §3, Fig. 3): where a device's failure and
// restart events go in the serial order of routines, and so which routines
// they abort, per visibility model. An event is the moment the device's
// group commits the device going down or coming back up (a device leader's
// detection, safehome.md: "the event when the edge device detects the
// failure/restart"); the group counts them per device
// (DeviceGroupState::Device::availability_events), and that count, read
// through the group's log, is how a routine leader learns without clocks
// which events fell inside its routine:
//  - at the start of EXECUTING (every lock held, before the first command)
//    GSV and S-GSV read the counts of the devices they watch and commit them
//    (AvailabilityBaseline);
//  - each command records the count of its device when it began actuating
//    (CommandOutcome.availability_events, committed with the command);
//  - at the finish point (after the last command and its duration, before
//    the release) the leader reads the counts again, with whether each
//    device is up, and decides here. Aborting then rolls back as a failed
//    must command does.
// Reads and commands go through the devices' groups' logs, so "between two
// reads" is exact in each device's own order of events and commands.
//
// The rules, for a routine R and a device D (Fig. 3):
//  - WV: no failure serialization; R completes whatever fails.
//  - GSV (loose): R aborts if a device it locks (touches) fails or restarts
//    between R's start and its finish.
//  - S-GSV: R aborts if any device of the mesh fails or restarts between
//    R's start and its finish.
//  - PSV: the events of D are serialized before R when they precede R's
//    first command on D (a failure still under way then fails that command
//    instead); after R when they follow R's last command on D and D is up
//    again at R's finish (rule 3*); otherwise (between two of R's commands
//    on D, or D still down at the finish) R aborts.
//  - EV: as PSV, but an event after R's last command on D is serialized
//    after R whether or not D is back at R's finish (rule 3): R aborts only
//    for an event between two of its commands on D.
// The six cases of Fig. 3, for R = {A; B} and device A: (1) A fails and
// restarts before R starts; (2) A fails and restarts after R started, before
// R's command on A; (3) A fails between R's commands on A; (4) A fails after
// R's last command on A and restarts before R's finish; (5) A fails after
// R's last command on A and is still down at R's finish; (6) a device R does
// not touch fails and restarts while R runs. GSV aborts 2-5, S-GSV 2-6, PSV
// 3 and 5, EV 3, WV none (tests/routine/failure_serialization_test.cc).

// A device as the finish-point read found it.
struct DeviceAvailability {
  uint64_t events = 0;  // failure and restart events committed so far
  bool up = false;
};

// The watched devices' counts at R's start: a digest of the sorted
// (device, count) list (fixed-size, whatever the mesh's size) and, when
// there are few enough to name, the counts themselves.
struct AvailabilityBaseline {
  uint64_t digest = 0;
  uint32_t devices = 0;
  std::vector<uint64_t> events;  // parallel to the sorted device list; empty: too many to keep
};

// Baselines keep per-device counts up to this many devices (so a GSV abort
// names the device; every routine's locked set fits), only the digest
// beyond (an S-GSV mesh of many devices: the abort says a device changed).
inline constexpr size_t kMaxNamedBaselineDevices = 64;

AvailabilityBaseline make_baseline(const std::map<std::string, DeviceAvailability>& watched);
proto::AvailabilityBaselineMsg to_proto(const AvailabilityBaseline& baseline);
AvailabilityBaseline from_proto(const proto::AvailabilityBaselineMsg& msg);

// Which devices a model watches from R's start: none (WV, PSV, EV), the
// devices R locks (GSV), or every device of the catalog (S-GSV).
enum class WatchedDevices { none, locked, all };
WatchedDevices watched_devices(Visibility visibility);
// Whether the model checks for events at R's finish point at all.
bool serializes_failures(Visibility visibility);

struct FinishCheck {
  Visibility visibility = Visibility::psv;
  // GSV, S-GSV: what R committed at its start (none: an invocation that
  // started without one, checked by the touches rule alone).
  std::optional<AvailabilityBaseline> baseline;
  // The watched devices now, sorted by id (the map's order).
  std::map<std::string, DeviceAvailability> watched_now;
  // For each device R's commands touched: the device's event count when each
  // of them began actuating, in command order (commands that never began
  // actuating recorded none).
  std::map<std::string, std::vector<uint64_t>> touches;
  // The touched devices now.
  std::map<std::string, DeviceAvailability> touched_now;
};

// Why R must abort at its finish point, or nothing if every event that
// fell inside it is serialized before or after it.
std::optional<std::string> failure_abort_reason(const FinishCheck& check);

}  // namespace mesh::routine
