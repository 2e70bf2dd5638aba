#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include <asio/io_context.hpp>

#include "agent/runtime/udp_socket.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::agent {

// A mesh of agents on one machine without root: each agent binds its own
// 127.0.0.x:port (all of 127.0.0.0/8 is local on Linux) and a topology file
// names its neighbours. Every agent could reach every other on loopback, so
// the topology is enforced here: broadcast() unicasts to each neighbour, and
// datagrams from anyone else are dropped and counted.
class LoopbackMeshLink final : public core::Link {
 public:
  // Throws std::runtime_error naming the cause and fix if self:port cannot
  // be bound.
  LoopbackMeshLink(asio::io_context& io, core::NodeId self, uint16_t port, std::vector<core::NodeId> neighbours);

  core::Ipv4Address local_address() const override { return self_; }
  void broadcast(core::ByteSpan datagram) override;
  void send(core::Ipv4Address neighbour, core::ByteSpan datagram) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  size_t max_datagram_size() const override { return kMaxDatagramSize; }

  const std::vector<core::NodeId>& neighbours() const { return neighbours_; }
  uint16_t port() const { return port_; }
  const UdpSocket::Counters& counters() const { return socket_->counters(); }
  // Datagrams from addresses that are not our neighbours in the topology.
  uint64_t non_neighbour_dropped() const { return non_neighbour_dropped_; }

  // The same budget as a real interface, so the demo exercises chunking.
  static constexpr size_t kMaxDatagramSize = 1400;

 private:
  void receive(core::Ipv4Address from, core::ByteSpan datagram);

  core::NodeId self_;
  uint16_t port_;
  std::vector<core::NodeId> neighbours_;
  std::unordered_set<core::NodeId> neighbour_set_;
  Receiver receiver_;
  uint64_t non_neighbour_dropped_ = 0;
  std::unique_ptr<UdpSocket> socket_;
};

}  // namespace mesh::agent
