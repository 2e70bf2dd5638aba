#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/link.h"
#include "core/metrics.h"
#include "core/transport.h"
#include "routing/agent_directory.h"
#include "routing/hop_arq.h"
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
// Mixed meshes (given an AgentDirectory): hop-by-hop delivery needs an agent
// at every hop, so where the next hop of a route is not an agent (it runs
// only an OLSR daemon) the message leaves end to end instead: one datagram
// to the destination's address over the kernel's IP routes
// (Link::send_routed), sealed by the authenticated link like any other. It
// goes with ttl 1, so the receiver delivers it when it is the destination
// and never forwards it (a misrouted one is dropped as ttl_expired), and
// with the route's hop count added to its hops, so hop statistics stay in
// radio hops. The choice is made at every agent on the way: the source when
// its own next hop is plain, or the last agent before a plain router. Only
// a destination known to be an agent goes end to end; anything else (and
// every message on a link without routed sends, such as the simulator's,
// whose meshes are all agents) keeps the hop-by-hop path.
//
// Floods: MPR flooding stops at a plain router, which does not relay agent
// messages. So every agent that puts a flood on the air (its source, and
// each MPR retransmitting it) also sends one end-to-end copy, with ttl 1, to
// each agent whose route from it starts at a plain router. Copies are
// delivered once, like any flooded message, and never retransmitted. What
// this misses: an agent whose route from every transmitter starts at an
// agent that is not on the MPR flood's path, while the flood's own path to
// it runs through plain routers only. Camera's RELEASE is the one flood; a
// node that misses one keeps the releaser's entry in its recently-OKed set
// until the releaser's next request replaces it, so later requesters ask the
// releaser once more: a cost in messages, since Camera's fencing argument
// also holds through the recently-OKed set alone.
//
// Hop-by-hop ARQ (Options::hop_arq, routing/hop_arq.h; off by default):
// every unicast hop transmission of the hop-by-hop path (the source's send
// and each forward, never a flood nor an end-to-end send_routed) asks its
// next hop for a link-level ack (hop_seq) and is retransmitted to it until
// acked or given up. The transport acknowledges every datagram that asks,
// whatever its own setting, and hands on only the first copy of each, so a
// retransmission is never delivered or forwarded twice. Acks are Envelopes
// of their own (hop_ack), sealed by the authenticated link like the rest.
// Off by default: on real 802.11 unicast the MAC already acknowledges and
// retransmits every frame; turn it on for lossy links without that.
//
// Hop-by-hop traffic is counted with scope "hop" (every datagram sent or
// received on the link, forwarded ones, retransmissions and acks, layer
// "hop_ack", included), end-to-end traffic with scope "e2e" (once at the
// source, once at each destination).
class OlsrTransport final : public core::Transport {
 public:
  struct Options {
    uint32_t default_ttl = 32;  // for messages sent with ttl 0
    // How long a flooded (src, msg_id) is remembered, so a late copy is
    // neither delivered nor retransmitted again (DUP_HOLD_TIME).
    core::Duration flood_hold = std::chrono::seconds(30);
    // Beyond this many remembered floods the oldest are forgotten first.
    size_t flood_capacity = 16384;
    HopArq::Options hop_arq;
  };

  // `link` must name peers by NodeId, i.e. be a core::AuthenticatedLink.
  // `olsr` supplies routes and MPR selectors, `agents` (optional: without it
  // every node is taken for an agent) which nodes run an agent; both must
  // outlive the transport.
  OlsrTransport(core::Env& env, core::Link& link, const olsr::OlsrProtocol& olsr, core::Metrics& metrics,
                Options options, const AgentDirectory* agents = nullptr);
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
  // Hop datagrams awaiting a link-level ack (for tests and status).
  size_t hop_acks_pending() const { return hop_arq_.pending(); }

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
  // Acknowledges the hop datagram `hop_seq` just received from `from`.
  void send_hop_ack(core::Ipv4Address from, uint64_t hop_seq);
  void on_flood(core::NodeId from, core::Message message, size_t bytes);
  void forward(core::Message message);
  // Encodes and puts one datagram on the link: to `next_hop`, or to every
  // neighbour when unset. The next hop is the neighbour's interface address
  // from the route, not its main address: on a node with several interfaces
  // only the address on the shared link is reachable from here.
  core::SendStatus transmit(const core::Message& message, std::optional<core::Ipv4Address> next_hop);
  // Along `route` to message.dst: end to end when its next hop is not an
  // agent and the destination is, else hop by hop.
  core::SendStatus route_message(core::Message message, const olsr::Route& route);
  // End to end to `to` over the kernel's routes, `route_hops` away; nullopt
  // when the link has no routed sends (nothing was sent then).
  std::optional<core::SendStatus> transmit_routed(core::Message message, core::NodeId to, uint32_t route_hops);
  // The end-to-end copies of a flood this node just put on the air.
  void copy_flood_beyond_plain_routers(const core::Message& message);
  // The entry for `key`, inserted fresh if absent or expired; `inserted` says which.
  FloodEntry& remember(const FloodKey& key, bool& inserted);
  void forget_expired();
  void deliver(const core::Message& message);
  void deliver_local();
  void drop(std::string_view reason, const core::Message* message = nullptr);
  enum class Scope : uint8_t { e2e, hop };
  enum class Direction : uint8_t { sent, received };
  // Metrics::count_traffic()'s series for messages of `body_type` and
  // `kind`, found on first use: counting every message and datagram by a
  // series key built and hashed each time cost more than routing it.
  core::TrafficCounter& traffic(Scope scope, Direction direction, uint32_t body_type, core::MessageKind kind);
  void count(Scope scope, Direction direction, const core::Message& message, size_t bytes);

  core::Env& env_;
  core::Link& link_;
  const olsr::OlsrProtocol& olsr_;
  core::Metrics& metrics_;
  const AgentDirectory* agents_;
  Options options_;
  Receiver receiver_;
  HopArq hop_arq_;
  std::map<FloodKey, FloodEntry> floods_;
  // Insertion order, for expiry and eviction: times only grow.
  std::deque<std::pair<core::TimePoint, FloodKey>> flood_order_;
  std::deque<core::Message> local_;
  core::ScopedTimer local_timer_;
  core::Counter& forwarded_;
  core::Counter& flood_retransmitted_;
  core::Counter& routed_sent_;
  core::Histogram& delivered_hops_;
  // traffic()'s series by body type (a handful: the layers above, and what
  // the envelope decoder accepts), each by kind, scope and direction.
  struct LayerTraffic {
    uint32_t body_type;
    std::array<std::optional<core::TrafficCounter>, 16> counters;
  };
  std::vector<LayerTraffic> traffic_;
};

}  // namespace mesh::routing
