#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "agent/device_service.h"
#include "agent/kgroup_service.h"
#include "agent/routine_service.h"
#include "core/messenger.h"
#include "core/node_id.h"
#include "core/packet_auth.h"
#include "membership/medley_options.h"
#include "mutex/camera_options.h"
#include "routine/catalog_sync.h"
#include "routine/device_leaders.h"
#include "routine/device_model.h"
#include "routine/device_watcher.h"
#include "routine/precondition_rule.h"
#include "routine/routine_leaders.h"
#include "routing/olsr_protocol.h"
#include "routing/olsr_transport.h"

namespace mesh::agent {

// Devices: the catalog file's contents and the timings of the device layer
// (TOML [devices], agent/config.h).
struct DevicesConfig {
  // The devices of the catalog file (checked), and the file's SHA-256, which
  // nodes gossip so that differing files are noticed.
  std::vector<routine::DeviceSpec> catalog;
  std::vector<routine::RoutineSpec> routines;                // the catalog file's [[routine]] tables
  std::vector<routine::PreconditionRuleSpec> preconditions;  // its [[precondition]] tables
  std::string catalog_digest;
  routine::DeviceLeaderOptions leaders;
  routine::CatalogSyncOptions sync;
  routine::DeviceWatcherOptions watcher;
  DeviceServiceOptions service;
};

// Routines: locking and timings of the routine layer (TOML [routines]).
struct RoutinesConfig {
  routine::RoutineLeaderOptions leaders;
  RoutineServiceOptions service;
};

// Everything one Node needs to know about itself, already validated. The
// agent fills it from TOML (agent/config.h); the simulator from a scenario.
struct NodeConfig {
  std::string name;
  core::NodeId id;                   // main IPv4 address
  std::array<double, 3> location{};  // x, y, z in metres
  core::MeshKey mesh_key;
  // Accepted on receive besides mesh_key, never used to seal: the other key
  // while the mesh rotates keys (core/packet_auth.h).
  std::optional<core::MeshKey> accepted_mesh_key;
  unsigned replay_window = 256;  // per-sender counters remembered below the highest
  // OLSR (RFC 3626); the Node sets main_address to `id`.
  routing::olsr::OlsrOptions routing;
  // Routing only (routing.routing_only): OLSR runs, nothing of the agent
  // does; the node relays IP for the mesh like a plain olsrd, neither
  // announces itself as an agent nor sends, receives or relays agent
  // messages. Mixed-mesh testing, and relays that should stay plain.
  bool routing_only = false;
  // Mixed mesh (routing.mixed_mesh): announce this node as an agent through
  // OLSR and send end to end where a route's next hop is no agent
  // (routing/agent_directory.h, routing/olsr_transport.h). Off, the node
  // takes every node for an agent, as before, and floods nothing extra.
  bool mixed_mesh = false;
  routing::OlsrTransport::Options transport;
  core::Messenger::Options messaging;
  // Medley; the Node sets name and location from the fields above.
  membership::MedleyOptions membership;
  mutex::CameraOptions mutex;
  // k-groups; the agent runtime sets kgroup.epoch_origin from the system clock.
  KgroupConfig kgroup;
  DevicesConfig devices;
  RoutinesConfig routines;
  core::Duration ping_timeout = std::chrono::seconds(5);
  // Tests only (not in the config file): false sends messages without
  // waiting for the storage changes before them to be durable, which the
  // power-cut sweeps must catch as lost acknowledged writes.
  bool output_commit = true;
};

}  // namespace mesh::agent
