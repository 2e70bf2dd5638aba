#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <asio/io_context.hpp>

#include "agent/runtime/udp_socket.h"
#include "core/expected.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::agent {

// One interface's IPv4 configuration as the kernel reports it.
struct InterfaceAddress {
  std::string name;
  core::Ipv4Address address;
  core::Ipv4Address broadcast;
};

// The Link of a real node (a Pi, or an agent in a network namespace): one UDP
// socket bound to 0.0.0.0:port. broadcast() sends to the broadcast address of
// every configured interface, send() unicasts. Our own broadcasts loop back
// and are ignored. Interface addresses are read once, at construction.
class UdpInterfaceLink final : public core::Link {
 public:
  // Throws std::runtime_error if the list is empty, an interface is missing
  // or has no IPv4 address, or the port cannot be bound; the message names
  // the cause and the fix.
  UdpInterfaceLink(asio::io_context& io, const std::vector<std::string>& interfaces, uint16_t port);

  // The IPv4 address and broadcast address of `name` (getifaddrs), or why not.
  static core::Expected<InterfaceAddress, std::string> lookup_interface(const std::string& name);
  // Just the address; main() uses it as the NodeId when none is configured.
  static core::Expected<core::Ipv4Address, std::string> interface_address(const std::string& name);

  core::Ipv4Address local_address() const override { return interfaces_.front().address; }
  void broadcast(core::ByteSpan datagram) override;
  void send(core::Ipv4Address neighbour, core::ByteSpan datagram) override;
  // One socket serves both: the kernel routes a unicast to its destination
  // whether it is a neighbour or not.
  bool send_routed(core::Ipv4Address destination, core::ByteSpan datagram) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  size_t max_datagram_size() const override { return kMaxDatagramSize; }

  const std::vector<InterfaceAddress>& interfaces() const { return interfaces_; }
  uint16_t port() const { return port_; }
  const UdpSocket::Counters& counters() const { return socket_->counters(); }
  // Our own broadcasts heard back.
  uint64_t own_datagrams_ignored() const { return own_ignored_; }

  // Fits one Ethernet or 802.11 frame with room for IP, UDP and mesh headers.
  static constexpr size_t kMaxDatagramSize = 1400;

 private:
  void receive(core::Ipv4Address from, core::ByteSpan datagram);
  bool is_own_address(core::Ipv4Address address) const;

  std::vector<InterfaceAddress> interfaces_;
  uint16_t port_;
  Receiver receiver_;
  uint64_t own_ignored_ = 0;
  std::unique_ptr<UdpSocket> socket_;
};

}  // namespace mesh::agent
