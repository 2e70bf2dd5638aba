#include "routing/olsr_transport.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "core/log.h"
#include "routing/envelope_codec.h"

namespace mesh::routing {
namespace {

std::string_view type_name(core::MessageKind kind) {
  switch (kind) {
    case core::MessageKind::datagram:
      return "datagram";
    case core::MessageKind::request:
      return "request";
    case core::MessageKind::response:
      return "response";
    case core::MessageKind::rejection:
      return "rejection";
  }
  return "unknown";
}

}  // namespace

core::TrafficCounter& OlsrTransport::traffic(Scope scope, Direction direction, uint32_t body_type,
                                             core::MessageKind kind) {
  auto layer =
      std::find_if(traffic_.begin(), traffic_.end(), [&](const LayerTraffic& t) { return t.body_type == body_type; });
  if (layer == traffic_.end()) layer = traffic_.insert(traffic_.end(), LayerTraffic{body_type, {}});
  const size_t index =
      (static_cast<size_t>(kind) * 2 + static_cast<size_t>(scope)) * 2 + static_cast<size_t>(direction);
  std::optional<core::TrafficCounter>& counter = layer->counters[index];
  if (!counter) {
    counter = metrics_.traffic_counter(scope == Scope::e2e ? "e2e" : "hop", body_type_name(body_type), type_name(kind),
                                       direction == Direction::sent ? "sent" : "received");
  }
  return *counter;
}

void OlsrTransport::count(Scope scope, Direction direction, const core::Message& message, size_t bytes) {
  traffic(scope, direction, message.body_type, message.kind).add(bytes);
}

OlsrTransport::OlsrTransport(core::Env& env, core::Link& link, const olsr::OlsrProtocol& olsr, core::Metrics& metrics,
                             Options options, const AgentDirectory* agents)
    : env_(env),
      link_(link),
      olsr_(olsr),
      metrics_(metrics),
      agents_(agents),
      options_(options),
      hop_arq_(env, metrics, options.hop_arq),
      local_timer_(env),
      forwarded_(metrics.counter("transport_forwarded_total")),
      flood_retransmitted_(metrics.counter("transport_flood_retransmitted_total")),
      routed_sent_(metrics.counter("transport_routed_sent_total")),
      delivered_hops_(metrics.histogram("transport_delivered_hops")) {
  link_.set_receiver([this](core::Ipv4Address from, core::ByteSpan datagram) { receive(from, datagram); });
}

OlsrTransport::~OlsrTransport() {
  link_.set_receiver([](core::Ipv4Address, core::ByteSpan) {});
}

core::SendStatus OlsrTransport::send(core::Message message) {
  if (message.dst == core::kEveryNode) return flood(std::move(message));
  message.src = self();
  message.hops = 0;
  if (message.ttl == 0) message.ttl = options_.default_ttl;

  if (message.dst == self()) {
    count(Scope::e2e, Direction::sent, message, message.body.size());
    local_.push_back(std::move(message));
    if (!local_timer_.active()) local_timer_.start(core::Duration::zero(), [this] { deliver_local(); });
    return core::SendStatus::sent;
  }
  const std::optional<olsr::Route> route = olsr_.route_to(message.dst);
  if (!route) return core::SendStatus::no_route;
  return route_message(std::move(message), *route);
}

core::SendStatus OlsrTransport::route_message(core::Message message, const olsr::Route& route) {
  if (agents_ != nullptr && !agents_->next_hop_is_agent(route) && agents_->is_agent(message.dst)) {
    if (auto status = transmit_routed(message, message.dst, route.hops)) return *status;
  }
  return transmit(message, route.next_hop);
}

std::optional<core::SendStatus> OlsrTransport::transmit_routed(core::Message message, core::NodeId to,
                                                               uint32_t route_hops) {
  // A flood's source counted its one end-to-end send with the broadcast.
  const bool at_source = message.hops == 0 && message.dst != core::kEveryNode;
  message.ttl = 1;
  // The receiver adds the last one.
  message.hops += route_hops > 0 ? route_hops - 1 : 0;
  const std::string bytes = encode_envelope(message);
  if (bytes.size() > link_.max_datagram_size()) return core::SendStatus::too_large;
  const core::ByteSpan datagram(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!link_.send_routed(to, datagram)) return std::nullopt;
  routed_sent_.add();
  if (at_source) count(Scope::e2e, Direction::sent, message, bytes.size());
  count(Scope::hop, Direction::sent, message, bytes.size());
  return core::SendStatus::sent;
}

core::SendStatus OlsrTransport::flood(core::Message message) {
  message.src = self();
  message.dst = core::kEveryNode;
  message.hops = 0;
  if (message.ttl == 0) message.ttl = options_.default_ttl;
  const core::SendStatus status = transmit(message, std::nullopt);
  if (status != core::SendStatus::sent) return status;
  copy_flood_beyond_plain_routers(message);
  // Our own flood heard back from a neighbour's retransmission is a duplicate.
  bool inserted = false;
  remember(FloodKey{message.src, message.msg_id}, inserted).retransmitted = true;
  return status;
}

core::SendStatus OlsrTransport::transmit(const core::Message& message, std::optional<core::Ipv4Address> next_hop) {
  const uint64_t hop_seq = next_hop ? hop_arq_.next_seq() : 0;
  std::string bytes = encode_envelope(message, hop_seq);
  if (bytes.size() > link_.max_datagram_size()) return core::SendStatus::too_large;
  const core::ByteSpan datagram(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (next_hop) {
    link_.send(*next_hop, datagram);
  } else {
    link_.broadcast(datagram);
  }
  // A message leaving its source is one end-to-end send; a forwarded one is
  // only more hop-by-hop traffic.
  if (message.hops == 0) count(Scope::e2e, Direction::sent, message, bytes.size());
  count(Scope::hop, Direction::sent, message, bytes.size());
  if (hop_seq != 0) {
    hop_arq_.track(
        hop_seq, *next_hop,
        [this, to = *next_hop, body_type = message.body_type, kind = message.kind, bytes = std::move(bytes)] {
          link_.send(to, core::ByteSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
          traffic(Scope::hop, Direction::sent, body_type, kind).add(bytes.size());
        });
  }
  return core::SendStatus::sent;
}

void OlsrTransport::send_hop_ack(core::Ipv4Address from, uint64_t hop_seq) {
  const std::string bytes = encode_hop_ack(hop_seq);
  link_.send(from, core::ByteSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  metrics_.count_traffic("hop", "hop_ack", "datagram", "sent", bytes.size());
}

void OlsrTransport::receive(core::Ipv4Address from, core::ByteSpan datagram) {
  auto decoded = decode_hop_datagram(datagram);
  if (!decoded) {
    drop(to_string(decoded.error()));
    core::log("routing").debug("envelope dropped from={} reason={} bytes={}", from.to_string(),
                               to_string(decoded.error()), datagram.size());
    return;
  }
  if (decoded->hop_ack != 0) {
    metrics_.count_traffic("hop", "hop_ack", "datagram", "received", datagram.size());
    hop_arq_.on_ack(decoded->hop_ack);
    return;
  }
  core::Message& message = *decoded->message;
  count(Scope::hop, Direction::received, message, datagram.size());
  if (decoded->hop_seq != 0) {
    // Every copy is acked, so a lost ack is repaired by the retransmission
    // it caused; only the first is handed on.
    send_hop_ack(from, decoded->hop_seq);
    if (!hop_arq_.first_arrival(from, decoded->hop_seq)) return;
  }
  // Our own message come back: a flood retransmitted by a neighbour, or a
  // unicast caught in a transient routing loop.
  if (message.src == self()) {
    drop("own", &message);
    return;
  }
  ++message.hops;
  if (message.dst == core::kEveryNode) {
    on_flood(from, std::move(message), datagram.size());
    return;
  }
  if (message.dst == self()) {
    count(Scope::e2e, Direction::received, message, datagram.size());
    deliver(message);
    return;
  }
  forward(std::move(message));
}

void OlsrTransport::forward(core::Message message) {
  // The ttl counted the hop just travelled; what is left must cover the next.
  if (message.ttl <= 1) {
    drop("ttl_expired", &message);
    return;
  }
  const std::optional<olsr::Route> route = olsr_.route_to(message.dst);
  if (!route) {
    drop("no_route", &message);
    return;
  }
  --message.ttl;
  if (route_message(message, *route) != core::SendStatus::sent) {
    drop("too_large", &message);
    return;
  }
  forwarded_.add();
}

void OlsrTransport::on_flood(core::NodeId from, core::Message message, size_t bytes) {
  bool inserted = false;
  FloodEntry& entry = remember(FloodKey{message.src, message.msg_id}, inserted);
  if (inserted) {
    count(Scope::e2e, Direction::received, message, bytes);
    deliver(message);
  }
  // §3.4.1: a copy first heard from a non-selector may still be retransmitted
  // when one arrives from a selector; at most once either way.
  if (entry.retransmitted || message.ttl <= 1 || !olsr_.is_mpr_selector(from)) return;
  entry.retransmitted = true;
  --message.ttl;
  if (transmit(message, std::nullopt) != core::SendStatus::sent) return;
  flood_retransmitted_.add();
  copy_flood_beyond_plain_routers(message);
}

void OlsrTransport::copy_flood_beyond_plain_routers(const core::Message& message) {
  if (agents_ == nullptr) return;
  for (core::NodeId agent : agents_->agents_beyond_plain_routers()) {
    if (agent == message.src) continue;
    const std::optional<olsr::Route> route = olsr_.route_to(agent);
    if (!route) continue;
    // False only on a link without routed sends, where every other copy fails too.
    if (!transmit_routed(message, agent, route->hops)) return;
  }
}

OlsrTransport::FloodEntry& OlsrTransport::remember(const FloodKey& key, bool& inserted) {
  forget_expired();
  const core::TimePoint expires = env_.now() + options_.flood_hold;
  auto [it, fresh] = floods_.try_emplace(key, FloodEntry{expires, false});
  inserted = fresh;
  if (fresh) flood_order_.emplace_back(expires, key);
  return it->second;
}

void OlsrTransport::forget_expired() {
  const core::TimePoint now = env_.now();
  // Leave room for the entry about to be added.
  while (!flood_order_.empty() &&
         (flood_order_.front().first <= now || floods_.size() >= std::max<size_t>(options_.flood_capacity, 1))) {
    floods_.erase(flood_order_.front().second);
    flood_order_.pop_front();
  }
}

void OlsrTransport::deliver(const core::Message& message) {
  delivered_hops_.record(static_cast<double>(message.hops));
  if (receiver_) receiver_(message);
}

void OlsrTransport::deliver_local() {
  // Swap first: a receiver may send to self again, which must wait for the
  // next turn instead of growing this batch forever.
  std::deque<core::Message> batch;
  batch.swap(local_);
  for (auto& message : batch) {
    count(Scope::e2e, Direction::received, message, message.body.size());
    deliver(message);
  }
}

void OlsrTransport::drop(std::string_view reason, const core::Message* message) {
  metrics_.counter("transport_dropped_total", "reason", reason).add();
  if (message != nullptr) {
    core::log("routing").debug("envelope dropped reason={} src={} dst={} msg_id={} ttl={} hops={}", reason,
                               message->src.to_string(), message->dst.to_string(), message->msg_id, message->ttl,
                               message->hops);
  }
}

}  // namespace mesh::routing
