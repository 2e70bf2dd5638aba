#pragma once

// Where a value sits in a TOML file, for error messages that name the line to fix.

#include <cstdint>

#include <toml++/toml.h>

namespace mesh::agent {

// The 1-based line a region starts on; 1 when toml++ does not know it (a node built in code).
inline uint32_t line_of(const toml::source_region& region) {
  return region.begin.line == 0 ? 1 : region.begin.line;
}
inline uint32_t line_of(const toml::node& node) { return line_of(node.source()); }

}  // namespace mesh::agent
