#include "agent/runtime/udp_socket.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include <asio/error.hpp>
#include <asio/socket_base.hpp>

#include "core/log.h"

namespace mesh::agent {
namespace {

// Large enough for any UDP payload, so nothing arrives truncated; the layers
// above judge sizes.
constexpr size_t kReceiveBufferSize = 65536;
// Ports below this need root or CAP_NET_BIND_SERVICE on Linux.
constexpr uint16_t kFirstUnprivilegedPort = 1024;

asio::ip::address_v4 to_asio(core::Ipv4Address address) { return asio::ip::address_v4(address.value()); }

std::string bind_error(core::Ipv4Address address, uint16_t port, const asio::error_code& error) {
  const std::string where = fmt::format("cannot bind UDP {}:{}", address.to_string(), port);
  if (error == asio::error::address_in_use) {
    return fmt::format(
        "{}: address already in use; another meshagent (or another program) already uses this port on this "
        "address: stop it (`ss -ulpn 'sport = :{}'` shows who) or set link.agent_port to a free port",
        where, port);
  }
  if (error == asio::error::access_denied || error == asio::error::no_permission) {
    if (port < kFirstUnprivilegedPort) {
      return fmt::format(
          "{}: permission denied; ports below {} need root or CAP_NET_BIND_SERVICE: use a port of {} or more "
          "(link.agent_port) or grant the capability (AmbientCapabilities=CAP_NET_BIND_SERVICE in the systemd unit)",
          where, kFirstUnprivilegedPort, kFirstUnprivilegedPort);
    }
    return fmt::format("{}: permission denied ({}); check for a security policy restricting this port", where,
                       error.message());
  }
  if (error == std::errc::address_not_available) {
    return fmt::format(
        "{}: address not available; no interface has address {}: fix node.address in the config or assign the "
        "address to an interface",
        where, address.to_string());
  }
  return fmt::format("{}: {}", where, error.message());
}

}  // namespace

UdpSocket::UdpSocket(asio::io_context& io, core::Ipv4Address address, uint16_t port, bool broadcast,
                     Handler handler)
    : socket_(io),
      port_(port),
      handler_(std::move(handler)),
      buffer_(kReceiveBufferSize),
      alive_(std::make_shared<UdpSocket*>(this)) {
  asio::error_code error;
  socket_.open(asio::ip::udp::v4(), error);
  if (error) throw std::runtime_error(fmt::format("cannot open a UDP socket: {}", error.message()));
  // No SO_REUSEADDR: UDP has no TIME_WAIT to skip, and on Linux it would let
  // a second agent bind the same port silently and take half the datagrams
  // instead of failing with "address already in use".
  if (broadcast) socket_.set_option(asio::socket_base::broadcast(true), error);
  if (!error) socket_.non_blocking(true, error);
  if (error) throw std::runtime_error(fmt::format("cannot configure a UDP socket: {}", error.message()));
  socket_.bind(asio::ip::udp::endpoint(to_asio(address), port), error);
  if (error) throw std::runtime_error(bind_error(address, port, error));
  port_ = socket_.local_endpoint(error).port();
  receive_next();
}

UdpSocket::~UdpSocket() = default;

bool UdpSocket::send_to(core::Ipv4Address destination, uint16_t port, core::ByteSpan datagram) {
  asio::error_code error;
  socket_.send_to(asio::buffer(datagram.data(), datagram.size()),
                  asio::ip::udp::endpoint(to_asio(destination), port), 0, error);
  if (error) {
    ++counters_.send_errors;
    core::log("agent").debug("udp send failed to={}:{} bytes={} error={}", destination.to_string(), port,
                             datagram.size(), error.message());
    return false;
  }
  ++counters_.sent;
  return true;
}

void UdpSocket::receive_next() {
  std::weak_ptr<UdpSocket*> weak = alive_;
  socket_.async_receive_from(asio::buffer(buffer_), sender_, [weak](const asio::error_code& error, size_t size) {
    if (error == asio::error::operation_aborted) return;
    UdpSocket* self_ptr = nullptr;
    {
      const std::shared_ptr<UdpSocket*> alive = weak.lock();
      if (!alive) return;
      self_ptr = *alive;
    }
    UdpSocket& self = *self_ptr;
    if (error) {
      ++self.counters_.receive_errors;
      core::log("agent").debug("udp receive failed port={} error={}", self.port_, error.message());
    } else if (self.sender_.address().is_v4()) {
      ++self.counters_.received;
      const core::Ipv4Address from(self.sender_.address().to_v4().to_uint());
      // The handler may destroy this socket (and its link); stop if it did.
      self.handler_(from, self.sender_.port(), core::ByteSpan(self.buffer_.data(), size));
      if (weak.expired()) return;
    }
    self.receive_next();
  });
}

}  // namespace mesh::agent
