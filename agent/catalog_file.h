#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "routine/device_model.h"

namespace mesh::agent {

// A device catalog file: TOML, one [[device]] table per device.
//
//   [[device]]
//   id = "hall_light"              # [a-z0-9_.-]+, unique in the file
//   kind = "dimmer"                # switch, plug, dimmer, bulb, motion_sensor, ...
//   location = [4.0, 1.5, 0.0]     # x, y, z in metres
//   room = "hall"                  # optional
//   floor = "ground"               # optional
//   driver = "kasa://10.0.0.20"    # how the device leader reaches it
//
// The agent reads it at start ([devices] catalog in the agent config) and
// meshctl device add sends one to add or change devices at run time.
struct CatalogFile {
  std::vector<routine::DeviceSpec> devices;  // in file order
  std::string digest;                        // SHA-256 of the file's bytes (32 bytes)
};

// Parses and checks a catalog. The error lists every problem, one per line,
// each as "SOURCE:LINE: KEY: problem. Fix: ...".
core::Expected<CatalogFile, std::string> parse_catalog(std::string_view text, const std::string& source);

// Reads and parses the file at `path`.
core::Expected<CatalogFile, std::string> load_catalog(const std::string& path);

// The largest catalog accepted (bytes): far above a building's, small
// enough that a bad path (a device node, a log) is refused at once.
inline constexpr size_t kMaxCatalogBytes = 4 << 20;

}  // namespace mesh::agent
