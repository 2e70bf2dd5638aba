#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.h"
#include "core/node_id.h"

namespace mesh::agent {

// The loopback mesh's topology: which agents hear each other. The file holds
// one undirected edge per line, "ADDRESS ADDRESS" (IPv4 dotted quads,
// whitespace separated); '#' starts a comment; blank lines are ignored.
struct TopologyFile {
  // Each edge once, the smaller address first, sorted.
  std::vector<std::pair<core::NodeId, core::NodeId>> edges;

  // Sorted; empty for a node on no edge.
  std::vector<core::NodeId> neighbours_of(core::NodeId node) const;
  // Every address on some edge, sorted.
  std::vector<core::NodeId> nodes() const;
};

// The error names "source_name:line:" and the problem (bad address, wrong
// field count, self-loop). Duplicate edges, in either direction, are merged.
core::Expected<TopologyFile, std::string> parse_topology_file(std::string_view text, const std::string& source_name);

// Reads and parses `path`; an unreadable file is an error naming it.
core::Expected<TopologyFile, std::string> load_topology_file(const std::string& path);

}  // namespace mesh::agent
