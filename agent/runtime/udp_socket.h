#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>

#include "core/link.h"
#include "core/node_id.h"

namespace mesh::agent {

// One non-blocking UDP socket with a receive loop, shared by the agent's
// links. Sending never blocks the agent's single thread and never throws: a
// datagram the kernel will not take is dropped, logged at debug and counted,
// as the network itself would.
class UdpSocket {
 public:
  using Handler = std::function<void(core::Ipv4Address from, uint16_t from_port, core::ByteSpan datagram)>;
  struct Counters {
    uint64_t sent = 0;
    uint64_t send_errors = 0;
    uint64_t received = 0;
    uint64_t receive_errors = 0;
  };

  // Binds address:port (SO_BROADCAST if `broadcast`) and starts
  // receiving into `handler`. Throws std::runtime_error naming the address,
  // the cause and the fix (port in use, privileged port, missing address).
  UdpSocket(asio::io_context& io, core::Ipv4Address address, uint16_t port, bool broadcast, Handler handler);
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  // False if the datagram was dropped (already logged and counted).
  bool send_to(core::Ipv4Address destination, uint16_t port, core::ByteSpan datagram);

  uint16_t local_port() const { return port_; }
  const Counters& counters() const { return counters_; }

 private:
  void receive_next();

  asio::ip::udp::socket socket_;
  uint16_t port_;
  Handler handler_;
  std::vector<uint8_t> buffer_;
  asio::ip::udp::endpoint sender_;
  Counters counters_;
  std::shared_ptr<UdpSocket*> alive_;
};

}  // namespace mesh::agent
