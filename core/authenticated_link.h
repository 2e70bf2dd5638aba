#pragma once

#include <string_view>
#include <unordered_map>

#include "core/link.h"
#include "core/metrics.h"
#include "core/packet_auth.h"

namespace mesh::core {

// A Link that seals every datagram it sends and opens every datagram it
// receives (core/packet_auth.h), over a raw Link. Above it, peers are named by
// their authenticated NodeId instead of the address a datagram came from; it
// remembers which raw address each NodeId was last heard from and sends
// there (falling back to the NodeId itself, right for single-interface
// nodes). Datagrams that fail authentication are dropped and counted
// (auth_dropped_total{reason=...}), logged at debug, never delivered. Those
// delivered are counted by the key that opened them
// (auth_opened_total{key=sealing|accepted}): during a key rotation the
// operator sees when the key being retired stops being used.
class AuthenticatedLink final : public Link {
 public:
  AuthenticatedLink(Link& raw, PacketAuth& auth, NodeId self, Metrics& metrics);

  Ipv4Address local_address() const override { return self_; }
  void broadcast(ByteSpan datagram) override;
  void send(Ipv4Address neighbour, ByteSpan datagram) override;
  bool send_routed(Ipv4Address destination, ByteSpan datagram) override;
  void set_receiver(Receiver receiver) override;
  size_t max_datagram_size() const override;

 private:
  void receive(Ipv4Address from, ByteSpan datagram);
  void drop(Ipv4Address from, size_t size, std::string_view reason);

  Link& raw_;
  PacketAuth& auth_;
  NodeId self_;
  Metrics& metrics_;
  Receiver receiver_;
  std::unordered_map<NodeId, Ipv4Address> raw_address_of_;
  Counter& opened_with_sealing_key_;
  Counter& opened_with_accepted_key_;
};

}  // namespace mesh::core
