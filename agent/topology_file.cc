#include "agent/topology_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mesh::agent {
namespace {

constexpr std::string_view kSpace = " \t\r\f\v";

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (true) {
    pos = line.find_first_not_of(kSpace, pos);
    if (pos == std::string_view::npos) break;
    size_t end = line.find_first_of(kSpace, pos);
    if (end == std::string_view::npos) end = line.size();
    fields.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return fields;
}

std::string where(const std::string& source_name, size_t line) {
  return source_name + ":" + std::to_string(line) + ": ";
}

}  // namespace

std::vector<core::NodeId> TopologyFile::neighbours_of(core::NodeId node) const {
  std::vector<core::NodeId> result;
  for (const auto& [a, b] : edges) {
    if (a == node) result.push_back(b);
    if (b == node) result.push_back(a);
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

std::vector<core::NodeId> TopologyFile::nodes() const {
  std::vector<core::NodeId> result;
  for (const auto& [a, b] : edges) {
    result.push_back(a);
    result.push_back(b);
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

core::Expected<TopologyFile, std::string> parse_topology_file(std::string_view text, const std::string& source_name) {
  TopologyFile topology;
  size_t line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;

    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const auto fields = split_fields(line);
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return core::Unexpected(where(source_name, line_number) +
                              "wrong field count: expected 2 addresses (\"ADDRESS ADDRESS\", one edge), got " +
                              std::to_string(fields.size()));
    }
    core::NodeId ends[2];
    for (size_t i = 0; i < 2; ++i) {
      const auto address = core::Ipv4Address::parse(fields[i]);
      if (!address) {
        return core::Unexpected(where(source_name, line_number) + "bad address \"" + std::string(fields[i]) +
                                "\": expected an IPv4 dotted quad such as 127.0.0.1");
      }
      if (address->is_unspecified()) {
        return core::Unexpected(where(source_name, line_number) +
                                "bad address \"0.0.0.0\": the unspecified address cannot be a node");
      }
      ends[i] = *address;
    }
    if (ends[0] == ends[1]) {
      return core::Unexpected(where(source_name, line_number) + "self-loop: edge from " + ends[0].to_string() +
                              " to itself; an edge joins two different nodes");
    }
    topology.edges.emplace_back(std::min(ends[0], ends[1]), std::max(ends[0], ends[1]));
  }
  std::sort(topology.edges.begin(), topology.edges.end());
  topology.edges.erase(std::unique(topology.edges.begin(), topology.edges.end()), topology.edges.end());
  return topology;
}

core::Expected<TopologyFile, std::string> load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return core::Unexpected(path + ": cannot read topology file: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return core::Unexpected(path + ": cannot read topology file: read error");
  return parse_topology_file(text.str(), path);
}

}  // namespace mesh::agent
