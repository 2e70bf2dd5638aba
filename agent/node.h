#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/echo_service.h"
#include "agent/node_config.h"
#include "core/authenticated_link.h"
#include "core/env.h"
#include "core/link.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/packet_auth.h"
#include "core/storage.h"
#include "routing/one_hop_transport.h"

namespace mesh::agent {

// What the world gives a node: the agent's asio runtime or the simulator.
struct NodeContext {
  core::Env& env;
  core::Link& agent_link;  // raw datagrams on the agent port
  core::Storage& storage;
};

// One node with every layer wired, bottom up: authenticated link, transport
// (one-hop until OLSR lands), messenger (datagrams and reliable requests),
// services. The agent runtime and the simulator both run exactly this class.
// Single-threaded: every call and callback on the Env's thread.
class Node {
 public:
  // Reads and bumps the boot count in storage (the authentication counter
  // must never repeat across restarts); throws std::runtime_error if storage
  // cannot persist it, since sending would then risk counter reuse.
  Node(const NodeConfig& config, NodeContext context);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  // Starts periodic work (beacons). Call once.
  void start();

  core::NodeId id() const { return config_.id; }
  const std::string& name() const { return config_.name; }
  const NodeConfig& config() const { return config_; }
  uint64_t boot_count() const { return boot_count_; }
  core::Duration uptime() const;

  core::Metrics& metrics() { return metrics_; }
  const core::Metrics& metrics() const { return metrics_; }
  core::Messenger& messenger() { return *messenger_; }
  const routing::OneHopTransport& transport() const { return *transport_; }

  struct LayerLine {
    std::string layer;
    std::string summary;
  };
  // One line per layer, bottom up, for meshctl status.
  std::vector<LayerLine> status() const;

  // End-to-end echo; timeout 0 means config().ping_timeout.
  void ping(core::NodeId destination, core::Duration timeout, EchoService::Callback callback);

 private:
  NodeConfig config_;
  NodeContext context_;
  core::TimePoint started_at_;
  uint64_t boot_count_ = 0;
  core::Metrics metrics_;
  std::unique_ptr<core::PacketAuth> auth_;
  std::unique_ptr<core::AuthenticatedLink> link_;
  std::unique_ptr<routing::OneHopTransport> transport_;
  std::unique_ptr<core::Messenger> messenger_;
  std::unique_ptr<EchoService> echo_;
};

}  // namespace mesh::agent
