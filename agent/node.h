#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/device_service.h"
#include "agent/echo_service.h"
#include "agent/kgroup_service.h"
#include "agent/routine_service.h"
#include "agent/node_config.h"
#include "core/authenticated_link.h"
#include "core/env.h"
#include "core/link.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/output_commit_transport.h"
#include "core/packet_auth.h"
#include "core/checksummed_storage.h"
#include "core/storage.h"
#include "membership/medley.h"
#include "membership/olsr_hop_distances.h"
#include "routing/agent_directory.h"
#include "mutex/camera.h"
#include "routing/olsr_protocol.h"
#include "routing/olsr_transport.h"
#include "routine/catalog.h"
#include "routine/catalog_sync.h"
#include "routine/device_leaders.h"
#include "routine/device_watcher.h"
#include "routine/routine_leaders.h"
#include "routine/routine_messages.h"

namespace mesh::agent {

// What the world gives a node: the agent's asio runtime or the simulator.
struct NodeContext {
  core::Env& env;
  core::Link& agent_link;  // raw datagrams on the agent port
  core::Link& olsr_link;   // raw RFC 3626 packets on the routing port (UDP 698)
  core::Storage& storage;
  // Device I/O for the device groups this node leads (the agent's real
  // drivers, or emulated devices in the simulator). Null: the node leads no
  // device (any it would lead is reported down, "no drivers").
  routine::DriverFactory* drivers = nullptr;
};

// One node with every layer wired, bottom up: OLSR on its own link,
// authenticated agent link, multi-hop transport along OLSR's routes,
// messenger (datagrams and reliable requests), services. The agent runtime and the simulator both run exactly this
// class. Single-threaded: every call and callback on the Env's thread.
class Node {
 public:
  // Opens the storage checksummed (migrating bare values once), reads and
  // bumps the boot count in it (the authentication counter must never repeat
  // across restarts); throws std::runtime_error if storage cannot be
  // migrated, or the boot count is damaged or cannot be persisted, since
  // sending would then risk counter reuse.
  Node(const NodeConfig& config, NodeContext context);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  // Starts OLSR (HELLO, TC, MID, HNA emissions), with mixed_mesh the
  // agent-presence announcements, and Medley, which joins through the
  // symmetric one-hop neighbours (and with mixed_mesh the agents beyond plain
  // routers) as OLSR finds them; with routing_only, OLSR alone. Call once.
  void start();
  // Graceful shutdown, first half: Medley announces `left` (the node keeps
  // answering pings with that record). Keep the Env running about a second
  // afterwards so the announcement spreads, then destroy the Node.
  void leave();

  core::NodeId id() const { return config_.id; }
  const std::string& name() const { return config_.name; }
  const NodeConfig& config() const { return config_; }
  uint64_t boot_count() const { return boot_count_; }
  core::Duration uptime() const;
  core::Env& env() const { return context_.env; }

  core::Metrics& metrics() { return metrics_; }
  const core::Metrics& metrics() const { return metrics_; }
  core::Messenger& messenger() { return *messenger_; }
  const routing::OlsrTransport& transport() const { return *transport_; }
  const routing::olsr::OlsrProtocol& olsr() const { return *olsr_; }
  const routing::AgentDirectory& agents() const { return *agents_; }
  membership::MemberView& members() { return *medley_; }
  const membership::MemberView& members() const { return *medley_; }
  membership::Medley& medley() { return *medley_; }
  const membership::Medley& medley() const { return *medley_; }
  // Mutual exclusion over named resources, on Medley's member list.
  mutex::Camera& camera() { return *camera_; }
  const mutex::Camera& camera() const { return *camera_; }
  // k-groups: selection, the groups this node serves in, client writes.
  KgroupService& kgroups() { return *kgroups_; }
  const KgroupService& kgroups() const { return *kgroups_; }
  // Devices: the mesh-wide catalog, the device groups this node leads, its
  // subscriptions, and commands and catalog changes from its clients.
  const routine::Catalog& catalog() const { return catalog_; }
  routine::DeviceLeaders& device_leaders() { return *device_leaders_; }
  const routine::DeviceLeaders& device_leaders() const { return *device_leaders_; }
  routine::DeviceWatcher& device_watcher() { return *device_watcher_; }
  const routine::DeviceWatcher& device_watcher() const { return *device_watcher_; }
  DeviceService& devices() { return *devices_; }
  // Routines: the routine groups this node leads, and manual runs and reads
  // from its clients.
  routine::RoutineLeaders& routine_leaders() { return *routine_leaders_; }
  const routine::RoutineLeaders& routine_leaders() const { return *routine_leaders_; }
  RoutineService& routines() { return *routines_; }

  using RoutesListener = std::function<void(const std::vector<routing::olsr::Route>& routes)>;
  // Called with the whole new table each time OLSR's routing table changes
  // (from link or timer events, never re-entrantly from a call into the
  // Node). The hook for installing kernel routes; listeners run in the order
  // added.
  void add_routes_listener(RoutesListener listener) { routes_listeners_.push_back(std::move(listener)); }

  struct LayerLine {
    std::string layer;
    std::string summary;
  };
  // One line per layer, bottom up, for meshctl status.
  std::vector<LayerLine> status() const;

  // Runs `action` once every storage change made so far is durable
  // (core::Storage::after_durable), and not at all if the Node is destroyed
  // first: for what the node shows outside the mesh, meshctl answers and
  // device commands. Messages to other nodes are held for the same reason
  // by the OutputCommitTransport under the Messenger.
  void after_durable(std::function<void()> action);
  // Messages waiting for the disk now.
  size_t held_messages() const { return output_commit_ ? output_commit_->held() : 0; }

  // End-to-end echo; timeout 0 means config().ping_timeout.
  void ping(core::NodeId destination, core::Duration timeout, EchoService::Callback callback);

 private:
  void start_now();
  // OLSR's symmetric one-hop neighbours (main addresses).
  std::vector<core::NodeId> symmetric_neighbours() const;
  // Medley's contacts: the symmetric neighbours, and with mixed_mesh the
  // agents whose route starts at a plain router (in an all-agent mesh,
  // none), which a join through neighbours alone would never reach.
  std::vector<core::NodeId> medley_contacts() const;

  NodeConfig config_;
  NodeContext context_;
  core::TimePoint started_at_;
  uint64_t boot_count_ = 0;
  // context_.storage behind checksums: every layer reads and writes this.
  std::unique_ptr<core::ChecksummedStorage> storage_;
  core::Metrics metrics_;
  std::unique_ptr<core::PacketAuth> auth_;
  std::unique_ptr<core::AuthenticatedLink> link_;
  std::unique_ptr<routing::olsr::OlsrProtocol> olsr_;
  std::unique_ptr<routing::AgentDirectory> agents_;
  std::unique_ptr<routing::OlsrTransport> transport_;
  std::unique_ptr<core::OutputCommitTransport> output_commit_;
  std::unique_ptr<core::Messenger> messenger_;
  std::unique_ptr<EchoService> echo_;
  std::unique_ptr<membership::OlsrHopDistances> hop_distances_;
  std::unique_ptr<membership::Medley> medley_;
  // After the Medley it reads, so it is destroyed first.
  std::unique_ptr<mutex::Camera> camera_;
  // After the Medley and Messenger it uses, so it is destroyed first.
  std::unique_ptr<routine::RoutineMessages> routine_messages_;
  routine::Catalog catalog_;
  std::unique_ptr<routine::CatalogSync> catalog_sync_;
  std::unique_ptr<KgroupService> kgroups_;
  std::unique_ptr<routine::DriverFactory> no_drivers_;
  std::unique_ptr<routine::DriverFactory> output_commit_drivers_;
  // After the KgroupService they use, so they are destroyed first.
  std::unique_ptr<routine::DeviceLeaders> device_leaders_;
  std::unique_ptr<routine::DeviceWatcher> device_watcher_;
  std::unique_ptr<DeviceService> devices_;
  // After the DeviceWatcher it subscribes through.
  std::unique_ptr<routine::RoutineLeaders> routine_leaders_;
  std::unique_ptr<RoutineService> routines_;
  std::vector<RoutesListener> routes_listeners_;
  // Shared with actions waiting for the disk: false once the Node is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
