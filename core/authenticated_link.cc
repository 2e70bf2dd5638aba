#include "core/authenticated_link.h"

#include "core/log.h"

namespace mesh::core {

AuthenticatedLink::AuthenticatedLink(Link& raw, PacketAuth& auth, NodeId self, Metrics& metrics)
    : raw_(raw),
      auth_(auth),
      self_(self),
      metrics_(metrics),
      opened_with_sealing_key_(metrics.counter("auth_opened_total", {{"key", "sealing"}})),
      opened_with_accepted_key_(metrics.counter("auth_opened_total", {{"key", "accepted"}})) {
  raw_.set_receiver([this](Ipv4Address from, ByteSpan datagram) { receive(from, datagram); });
}

void AuthenticatedLink::broadcast(ByteSpan datagram) {
  const std::vector<uint8_t> sealed = auth_.seal(datagram);
  raw_.broadcast(sealed);
}

void AuthenticatedLink::send(Ipv4Address neighbour, ByteSpan datagram) {
  const std::vector<uint8_t> sealed = auth_.seal(datagram);
  auto it = raw_address_of_.find(neighbour);
  raw_.send(it == raw_address_of_.end() ? neighbour : it->second, sealed);
}

bool AuthenticatedLink::send_routed(Ipv4Address destination, ByteSpan datagram) {
  // The NodeId is the main address, which the kernel has a host route for;
  // the raw address last heard from may be an interface it has none for.
  return raw_.send_routed(destination, auth_.seal(datagram));
}

void AuthenticatedLink::set_receiver(Receiver receiver) { receiver_ = std::move(receiver); }

size_t AuthenticatedLink::max_datagram_size() const {
  const size_t raw = raw_.max_datagram_size();
  return raw > PacketAuth::kOverhead ? raw - PacketAuth::kOverhead : 0;
}

void AuthenticatedLink::receive(Ipv4Address from, ByteSpan datagram) {
  // No agent seals more than its raw link carries, so a bigger datagram is
  // junk; refusing it before the HMAC keeps a flood of 64 KiB datagrams from
  // costing a hash of every byte.
  if (datagram.size() > raw_.max_datagram_size()) {
    drop(from, datagram.size(), "oversized");
    return;
  }
  auto opened = auth_.open(datagram);
  if (!opened) {
    drop(from, datagram.size(), to_string(opened.error()));
    return;
  }
  // A UDP socket bound to the wildcard address hears its own broadcasts;
  // they are not news from a neighbour.
  if (opened->sender == self_) return;
  (opened->key == PacketAuth::Key::accepted ? opened_with_accepted_key_ : opened_with_sealing_key_).add();
  raw_address_of_[opened->sender] = from;
  if (receiver_) receiver_(opened->sender, opened->payload);
}

void AuthenticatedLink::drop(Ipv4Address from, size_t size, std::string_view reason) {
  metrics_.counter("auth_dropped_total", "reason", reason).add();
  log("core").debug("auth drop from={} size={} reason={}", from.to_string(), size, reason);
}

}  // namespace mesh::core
