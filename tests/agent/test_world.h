#pragma once

// A tiny deterministic world for agent tests: one virtual clock shared by
// every node, and an in-memory graph of links with a fixed one-way delay per
// direction. Delivery happens through the clock's timers, so advancing time
// runs the whole mesh.

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "agent/node.h"
#include "core/env.h"
#include "core/link.h"
#include "core/memory_storage.h"
#include "core/packet_auth.h"
#include "tests/support/manual_env.h"

namespace mesh::agent::testing {

// The agent tests were written against seed 7; keep their random streams.
class ManualEnv final : public test_support::ManualEnv {
 public:
  ManualEnv() : test_support::ManualEnv(7) {}
};

class LinkGraph;

// Which of a node's two links: agent Envelopes or OLSR packets.
enum class Channel { agent, routing };

class MemoryLink final : public core::Link {
 public:
  MemoryLink(LinkGraph& graph, core::Ipv4Address address, Channel channel)
      : graph_(graph), address_(address), channel_(channel) {}
  core::Ipv4Address local_address() const override { return address_; }
  void broadcast(core::ByteSpan datagram) override;
  void send(core::Ipv4Address neighbour, core::ByteSpan datagram) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  void deliver(core::Ipv4Address from, const std::vector<uint8_t>& datagram) {
    if (receiver_) receiver_(from, datagram);
  }

 private:
  LinkGraph& graph_;
  core::Ipv4Address address_;
  Channel channel_;
  Receiver receiver_;
};

// Both channels share the edges: a cable carries OLSR and agent traffic alike.
class LinkGraph {
 public:
  explicit LinkGraph(core::Env& env) : env_(env) {}

  // The agent-channel link of `address`.
  MemoryLink& add(core::Ipv4Address address) { return add(address, Channel::agent); }
  // The routing-channel (OLSR) link of `address`.
  MemoryLink& add_routing(core::Ipv4Address address) { return add(address, Channel::routing); }
  MemoryLink& add(core::Ipv4Address address, Channel channel) {
    auto& slot = links_[{channel, address}];
    slot = std::make_unique<MemoryLink>(*this, address, channel);
    return *slot;
  }
  // Both directions, each with its own one-way delay.
  void connect(core::Ipv4Address a, core::Ipv4Address b, core::Duration a_to_b, core::Duration b_to_a) {
    delay_[{a, b}] = a_to_b;
    delay_[{b, a}] = b_to_a;
  }
  void disconnect(core::Ipv4Address a, core::Ipv4Address b) {
    delay_.erase({a, b});
    delay_.erase({b, a});
  }
  void transmit(Channel channel, core::Ipv4Address from, core::Ipv4Address to, core::ByteSpan datagram) {
    auto delay = delay_.find({from, to});
    if (delay == delay_.end()) return;
    env_.start_timer(delay->second,
                     [this, channel, from, to, bytes = std::vector<uint8_t>(datagram.begin(), datagram.end())] {
                       // The edge may have gone down while the datagram was in flight.
                       if (!delay_.contains({from, to})) return;
                       auto link = links_.find({channel, to});
                       if (link != links_.end()) link->second->deliver(from, bytes);
                     });
  }
  void broadcast(Channel channel, core::Ipv4Address from, core::ByteSpan datagram) {
    for (const auto& [edge, delay] : delay_) {
      if (edge.first == from) transmit(channel, from, edge.second, datagram);
    }
  }

 private:
  core::Env& env_;
  std::map<std::pair<Channel, core::Ipv4Address>, std::unique_ptr<MemoryLink>> links_;
  std::map<std::pair<core::Ipv4Address, core::Ipv4Address>, core::Duration> delay_;
};

inline void MemoryLink::broadcast(core::ByteSpan datagram) { graph_.broadcast(channel_, address_, datagram); }
inline void MemoryLink::send(core::Ipv4Address neighbour, core::ByteSpan datagram) {
  graph_.transmit(channel_, address_, neighbour, datagram);
}

inline core::MeshKey test_key(char digit = 'a') { return core::MeshKey::from_hex(std::string(64, digit)).value(); }

inline core::NodeId ip(uint8_t last) { return core::NodeId::from_octets(10, 0, 0, last); }

inline NodeConfig test_config(uint8_t last, char key_digit = 'a') {
  NodeConfig config;
  config.name = "node" + std::to_string(last);
  config.id = ip(last);
  config.mesh_key = test_key(key_digit);
  return config;
}

}  // namespace mesh::agent::testing
