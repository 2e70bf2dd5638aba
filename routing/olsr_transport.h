#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string_view>

#include "core/env.h"
#include "core/link.h"
#include "core/metrics.h"
#include "core/transport.h"
#include "routing/olsr_protocol.h"

namespace mesh::routing {

// The agent's multi-hop Transport: agent Envelopes travel hop by hop along
// the routing table of the node's OlsrProtocol, so end-to-end delivery needs
// no kernel routes. Each hop decrements the Envelope's ttl and increments its
// hops; a message whose ttl runs out, or for which there is no route, is
// dropped and counted (transport_dropped_total{reason}).
//
// flood() reuses OLSR's MPR flooding (RFC 3626 §3.4.1) for agent messages:
// every node delivers a flooded Envelope once, remembered by (src, msg_id) for
// the duplicate hold time, and retransmits it once, only if it came from a
// neighbour that chose this node as its MPR. Receivers see dst == kEveryNode.
//
// Hop-by-hop traffic is counted with scope "hop" (every datagram sent or
// received on the link, forwarded ones included), end-to-end traffic with
// scope "e2e" (once at the source, once at each destination).
class OlsrTransport final : public core::Transport {
 public:
  struct Options {
    uint32_t default_ttl = 32;  // for messages sent with ttl 0
    // How long a flooded (src, msg_id) is remembered, so a late copy is
    // neither delivered nor retransmitted again (DUP_HOLD_TIME).
    core::Duration flood_hold = std::chrono::seconds(30);
    // Beyond this many remembered floods the oldest are forgotten first.
    size_t flood_capacity = 16384;
  };

  // `link` must name peers by NodeId, i.e. be a core::AuthenticatedLink.
  // `olsr` supplies routes and MPR selectors; it must outlive the transport.
  OlsrTransport(core::Env& env, core::Link& link, const olsr::OlsrProtocol& olsr, core::Metrics& metrics,
                Options options);
  // Detaches from the link, which may outlive the transport.
  ~OlsrTransport() override;
  OlsrTransport(const OlsrTransport&) = delete;
  OlsrTransport& operator=(const OlsrTransport&) = delete;

  core::NodeId self() const override { return link_.local_address(); }
  core::SendStatus send(core::Message message) override;
  core::SendStatus flood(core::Message message) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

  // Floods remembered right now (for tests and status).
  size_t floods_remembered() const { return floods_.size(); }

 private:
  struct FloodKey {
    core::NodeId src;
    uint64_t msg_id;
    friend auto operator<=>(const FloodKey&, const FloodKey&) = default;
  };
  struct FloodEntry {
    core::TimePoint expires;
    bool retransmitted = false;
  };

  void receive(core::Ipv4Address from, core::ByteSpan datagram);
  void on_flood(core::NodeId from, core::Message message, size_t bytes);
  void forward(core::Message message);
  // Encodes and puts one datagram on the link: to `next_hop`, or to every
  // neighbour when unset. The next hop is the neighbour's interface address
  // from the route, not its main address: on a node with several interfaces
  // only the address on the shared link is reachable from here.
  core::SendStatus transmit(const core::Message& message, std::optional<core::Ipv4Address> next_hop);
  // The entry for `key`, inserted fresh if absent or expired; `inserted` says which.
  FloodEntry& remember(const FloodKey& key, bool& inserted);
  void forget_expired();
  void deliver(const core::Message& message);
  void deliver_local();
  void drop(std::string_view reason, const core::Message* message = nullptr);

  core::Env& env_;
  core::Link& link_;
  const olsr::OlsrProtocol& olsr_;
  core::Metrics& metrics_;
  Options options_;
  Receiver receiver_;
  std::map<FloodKey, FloodEntry> floods_;
  // Insertion order, for expiry and eviction: times only grow.
  std::deque<std::pair<core::TimePoint, FloodKey>> flood_order_;
  std::deque<core::Message> local_;
  core::ScopedTimer local_timer_;
  core::Counter& forwarded_;
  core::Counter& flood_retransmitted_;
  core::Histogram& delivered_hops_;
};

}  // namespace mesh::routing
