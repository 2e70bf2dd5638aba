#include "agent/runtime/loopback_link.h"

#include <utility>

#include "core/log.h"

namespace mesh::agent {

LoopbackMeshLink::LoopbackMeshLink(asio::io_context& io, core::NodeId self, uint16_t port,
                                   std::vector<core::NodeId> neighbours)
    : self_(self), port_(port), neighbours_(std::move(neighbours)) {
  neighbour_set_.insert(neighbours_.begin(), neighbours_.end());
  socket_ = std::make_unique<UdpSocket>(
      io, self_, port_, /*broadcast=*/false,
      [this](core::Ipv4Address from, uint16_t, core::ByteSpan datagram) { receive(from, datagram); });
  port_ = socket_->local_port();
  core::log("agent").info("loopback link address={} port={} neighbours={}", self_.to_string(), port_,
                          neighbours_.size());
}

void LoopbackMeshLink::broadcast(core::ByteSpan datagram) {
  for (core::NodeId neighbour : neighbours_) socket_->send_to(neighbour, port_, datagram);
}

void LoopbackMeshLink::send(core::Ipv4Address neighbour, core::ByteSpan datagram) {
  socket_->send_to(neighbour, port_, datagram);
}

void LoopbackMeshLink::receive(core::Ipv4Address from, core::ByteSpan datagram) {
  if (neighbour_set_.count(from) == 0) {
    ++non_neighbour_dropped_;
    core::log("agent").debug("loopback link dropped datagram from non-neighbour from={} bytes={}", from.to_string(),
                             datagram.size());
    return;
  }
  if (receiver_) receiver_(from, datagram);
}

}  // namespace mesh::agent
