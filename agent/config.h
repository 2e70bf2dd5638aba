#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "agent/node_config.h"

namespace mesh::agent {

// A fatal start-up configuration error. what() names the file, the line, the
// dotted key, what is wrong and how to fix it; several problems found in one
// file are reported together, one per line.
class ConfigError : public std::runtime_error {
  using runtime_error::runtime_error;
};

struct LinkConfig {
  enum class Mode { interface, loopback };
  Mode mode = Mode::interface;
  std::vector<std::string> interfaces;  // interface mode: e.g. {"wlan0"}; required non-empty there
  std::string topology_file;            // loopback mode: required; edge list (agent/topology_file.h)
  uint16_t agent_port = 6980;           // UDP port of agent Envelopes
  // UDP port of OLSR (RFC 3626) packets. Unset in the file: 698 (the IANA
  // port, what other OLSR daemons use) in interface mode, agent_port + 1 in
  // loopback mode, where ports below 1024 would need root. Always set after
  // parsing.
  uint16_t olsr_port = 698;
};

// rtm_protocol that marks the agent's kernel routes (KernelRoutes::kDefaultProtocol).
inline constexpr uint8_t kDefaultKernelRouteProtocol = 158;

// routing.install_kernel_routes and routing.kernel_route_protocol: whether
// the agent writes OLSR's routes into the kernel's table, for plain IP.
struct KernelRoutesConfig {
  bool install = false;
  uint8_t protocol = kDefaultKernelRouteProtocol;  // 5 to 255; 0 to 4 belong to the kernel and the administrator
};

// Paths (mesh_key_file, accepted_mesh_key_file, topology_file, data_dir, admin_socket) are stored
// resolved: a relative path in the file is taken relative to the config
// file's directory, so an agent behaves the same whatever its working
// directory (systemd starts it in /).
struct AgentConfig {
  std::string source;  // the file it came from
  // node.id may be unspecified (0.0.0.0) in interface mode: the runtime takes
  // the first interface's address then.
  NodeConfig node;
  LinkConfig link;
  KernelRoutesConfig kernel_routes;  // refused in loopback mode
  std::string admin_socket = "/run/meshagent/admin.sock";
  std::string data_dir = "/var/lib/meshagent";  // Storage lives here
  std::string mesh_key_file = "/etc/meshagent/mesh.key";
  // The other key of a rotation in progress, or empty (the default).
  std::string accepted_mesh_key_file;
  // [devices] catalog; empty: no catalog file (devices only from meshctl).
  // Its devices, routines and precondition rules are in
  // node.devices.catalog, node.devices.routines and
  // node.devices.preconditions.
  std::string catalog_file;
  std::string log_level = "info";
  std::map<std::string, std::string> layer_log_levels;  // [log.layers] routing = "debug"
};

// Parses and validates; reads the mesh key file (path relative to the config
// file's directory if not absolute). Throws ConfigError.
AgentConfig load_config(const std::string& path);

// Same from text, for tests; relative paths resolve against `base_dir`
// (the working directory when empty).
AgentConfig parse_config(std::string_view toml_text, const std::string& source_name, const std::string& base_dir);

// Every key the parser accepts, dotted ("node.name"; the per-layer levels
// "log.layers.<layer>" as "log.layers.*"), for the documentation test.
std::vector<std::string> known_config_keys();

// The layers [log.layers] accepts.
std::vector<std::string> known_log_layers();

}  // namespace mesh::agent
