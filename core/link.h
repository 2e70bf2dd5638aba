#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/node_id.h"

namespace mesh::core {

using ByteSpan = std::span<const uint8_t>;

// One hop: datagrams to the nodes within radio (or cable) range. One Link
// carries one kind of traffic (OLSR on its port, agent Envelopes on theirs).
// Peers are named by the address a datagram came from; for a node with one
// interface that is its NodeId. Delivery is unreliable and unordered.
class Link {
 public:
  using Receiver = std::function<void(Ipv4Address from, ByteSpan datagram)>;

  virtual ~Link() = default;

  // This end's address on the link (the sender address peers will see).
  virtual Ipv4Address local_address() const = 0;
  // To every one-hop neighbour (on every interface).
  virtual void broadcast(ByteSpan datagram) = 0;
  // To one neighbour, by the address it sends from.
  virtual void send(Ipv4Address neighbour, ByteSpan datagram) = 0;
  // To any node of the mesh, several hops away, over the IP routes of this
  // host's kernel (which OLSR keeps filled): the path around nodes that relay
  // IP but not agent traffic. False when this link has no such path (the
  // simulator's links, the loopback testbed); then nothing was sent.
  virtual bool send_routed(Ipv4Address destination, ByteSpan datagram) {
    (void)destination;
    (void)datagram;
    return false;
  }
  // The one receiver of incoming datagrams; replaces any earlier one.
  virtual void set_receiver(Receiver receiver) = 0;
  // Largest datagram this link carries.
  virtual size_t max_datagram_size() const { return 1400; }
};

}  // namespace mesh::core
