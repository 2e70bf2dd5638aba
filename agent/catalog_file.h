#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"
#include "routine/precondition_rule.h"
#include "routine/routine_model.h"

namespace mesh::agent {

// A catalog file: TOML, one [[device]] table per device, one [[routine]]
// table per routine and one [[precondition]] table per APEX precondition
// rule.
//
//   [[device]]
//   id = "hall_light"              # [a-z0-9_.-]+, unique in the file
//   kind = "dimmer"                # switch, plug, dimmer, bulb, motion_sensor, ...
//   location = [4.0, 1.5, 0.0]     # x, y, z in metres
//   room = "hall"                  # optional
//   floor = "ground"               # optional
//   driver = "kasa://10.0.0.20"    # how the device leader reaches it
//
//   [[routine]]
//   id = "night_hall"                       # [a-z0-9_.-]+, unique in the file
//   trigger = "hall_motion.motion == on"    # routine/trigger.h; or "manual"
//   window = "22:00-06:00"                  # optional: HH:MM-HH:MM, may wrap midnight
//   days = ["mon..fri"]                     # optional: mon..sun and ranges
//   min_retrigger_s = 10                    # optional, default 10
//   enabled = true                          # optional, default true
//   lock = "sla"                            # optional: default, sla, ola or aggressive
//   uses = ["pump"]                         # optional: mesh-wide resources
//   [[routine.command]]                     # one or more, run in order
//   device = "hall_light"
//   set = { power = "on", brightness = 30 }
//   duration_s = 300                        # optional: keep the device this long
//   must = true                             # optional, default true; false: best effort
//   undo = { brightness = 0 }               # optional: what a rollback sets instead of the
//                                           # value before the command (attributes it sets only)
//
//   [[precondition]]
//   id = "dim_needs_motion_off"             # [a-z0-9_.-]+, unique in the file
//   when = "hall_light.power == on"         # a condition a command makes true
//   requires = ["hall_motion.motion == off"]  # conditions that must hold first
//
// Rules are read by the rules file's parser (routine/precondition_rule.h
// gives their grammar), so a catalog that has any must be ASCII throughout.
//
// The agent reads it at start ([devices] catalog in the agent config);
// meshctl device add, routine add and precondition add send one to add or
// change devices, routines or rules at run time.
struct CatalogFile {
  std::vector<routine::DeviceSpec> devices;                  // in file order
  std::vector<routine::RoutineSpec> routines;                // in file order
  std::vector<routine::PreconditionRuleSpec> preconditions;  // in file order
  std::string digest;                                        // SHA-256 of the file's bytes (32 bytes)
};

// Parses and checks a catalog. The error lists every problem, one per line,
// each as "SOURCE:LINE: KEY: problem. Fix: ...". A routine or a rule may use
// the file's devices and, given `known_devices` (the mesh's catalog, for
// meshctl routine add and precondition add), those too; the file the agent
// starts from stands alone.
core::Expected<CatalogFile, std::string> parse_catalog(std::string_view text, const std::string& source,
                                                       const routine::DeviceCatalog* known_devices = nullptr);

// Reads and parses the file at `path`.
core::Expected<CatalogFile, std::string> load_catalog(const std::string& path);

// The largest catalog accepted (bytes): far above a building's, small
// enough that a bad path (a device node, a log) is refused at once.
inline constexpr size_t kMaxCatalogBytes = 4 << 20;

}  // namespace mesh::agent
