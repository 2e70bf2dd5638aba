#include "sim/ideal_routing.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "routing/envelope_codec.h"

namespace mesh::sim {

class IdealRouting::NodeTransport final : public core::Transport {
 public:
  NodeTransport(IdealRouting& routing, core::NodeId id, size_t index) : routing_(routing), id_(id), index_(index) {}

  core::NodeId self() const override { return id_; }
  core::SendStatus send(core::Message message) override { return routing_.send_from(*this, std::move(message)); }
  core::SendStatus flood(core::Message message) override { return routing_.flood_from(*this, std::move(message)); }
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

  size_t index() const { return index_; }
  const Receiver& receiver() const { return receiver_; }

 private:
  IdealRouting& routing_;
  core::NodeId id_;
  size_t index_;
  Receiver receiver_;
};

IdealRouting::IdealRouting(Simulator& simulator, Network& network, uint64_t seed)
    : simulator_(simulator), network_(network), seed_(seed), rng_(seed) {}

IdealRouting::~IdealRouting() = default;

core::Transport& IdealRouting::transport(core::NodeId id) {
  auto it = transports_.find(id);
  if (it == transports_.end()) {
    std::optional<size_t> index = network_.index_of(id);
    if (!index) throw std::invalid_argument("IdealRouting: no node " + id.to_string() + " in the network");
    it = transports_.emplace(id, std::make_unique<NodeTransport>(*this, id, *index)).first;
  }
  return *it->second;
}

bool IdealRouting::hop_usable(size_t a, size_t b) const {
  core::NodeId x = Network::address_of(a);
  core::NodeId y = Network::address_of(b);
  if (!network_.node_up(x) || !network_.node_up(y) || !network_.can_talk(x, y)) return false;
  std::optional<LinkParams> params = network_.link_params(x, y);
  return params && params->up;
}

std::vector<std::optional<size_t>> IdealRouting::bfs_parents(size_t from) const {
  std::vector<std::optional<size_t>> parent(network_.node_count());
  if (!network_.node_up(Network::address_of(from))) return parent;
  parent[from] = from;
  std::deque<size_t> queue{from};
  while (!queue.empty()) {
    size_t u = queue.front();
    queue.pop_front();
    for (core::NodeId neighbour : network_.neighbours(Network::address_of(u))) {
      size_t v = *network_.index_of(neighbour);
      if (parent[v] || !hop_usable(u, v)) continue;
      parent[v] = u;
      queue.push_back(v);
    }
  }
  return parent;
}

std::optional<uint32_t> IdealRouting::hops(core::NodeId from, core::NodeId to) const {
  std::optional<size_t> a = network_.index_of(from);
  std::optional<size_t> b = network_.index_of(to);
  if (!a || !b) return std::nullopt;
  std::vector<std::optional<size_t>> parent = bfs_parents(*a);
  if (!parent[*b]) return std::nullopt;
  uint32_t count = 0;
  for (size_t v = *b; v != *a; v = *parent[v]) ++count;
  return count;
}

core::SendStatus IdealRouting::send_from(NodeTransport& sender, core::Message message) {
  message.src = sender.self();
  if (message.ttl == 0) message.ttl = default_ttl_;
  message.hops = 0;
  std::optional<core::Message> wire = through_codec(sender, message);
  if (!wire) return core::SendStatus::too_large;
  std::optional<size_t> to = network_.index_of(message.dst);
  if (!to) {
    ++stats_.unroutable;
    return core::SendStatus::no_route;
  }
  std::vector<std::optional<size_t>> parent = bfs_parents(sender.index());
  if (!parent[*to]) {
    ++stats_.unroutable;
    return core::SendStatus::no_route;
  }
  ++stats_.sent;
  // A message to self crosses no hop, so there is nothing to acknowledge.
  if (!hop_arq_options_ || *to == sender.index()) {
    carry(parent, sender.index(), *to, *wire);
    return core::SendStatus::sent;
  }
  std::vector<size_t> path;  // reversed first: `to` first, the sender last
  for (size_t v = *to; v != sender.index(); v = *parent[v]) path.push_back(v);
  if (path.size() > wire->ttl) {
    ++stats_.unroutable;
    return core::SendStatus::sent;
  }
  path.push_back(sender.index());
  std::reverse(path.begin(), path.end());
  send_hop(std::make_shared<const std::vector<size_t>>(std::move(path)), 0, std::move(*wire));
  return core::SendStatus::sent;
}

void IdealRouting::enable_hop_arq(routing::HopArq::Options options) {
  options.enabled = true;
  hop_arq_options_ = options;
}

routing::HopArq& IdealRouting::hop_arq(size_t node) {
  if (arq_nodes_.size() < network_.node_count()) arq_nodes_.resize(network_.node_count());
  ArqNode& slot = arq_nodes_[node];
  if (!slot.arq) {
    slot.env = std::make_unique<SimEnv>(simulator_, mix_seed(seed_, 0xa12c), static_cast<uint32_t>(node), 0);
    slot.arq = std::make_unique<routing::HopArq>(*slot.env, hop_arq_metrics_, *hop_arq_options_);
  }
  return *slot.arq;
}

void IdealRouting::send_hop(const Path& path, size_t at, core::Message message) {
  const size_t to = (*path)[at + 1];
  routing::HopArq& arq = hop_arq((*path)[at]);
  const uint64_t seq = arq.next_seq();
  const size_t bytes = routing::encode_envelope(message, seq).size();
  transmit_hop(path, at, seq, bytes, message);
  arq.track(seq, Network::address_of(to),
            [this, path, at, seq, bytes, message] { transmit_hop(path, at, seq, bytes, message); });
}

void IdealRouting::transmit_hop(const Path& path, size_t at, uint64_t seq, size_t bytes, const core::Message& message) {
  const core::NodeId from = Network::address_of((*path)[at]);
  const core::NodeId to = Network::address_of((*path)[at + 1]);
  if (!network_.node_up(from)) return;
  ++stats_.hop_transmissions;
  stats_.hop_bytes += bytes;
  const LinkParams params = *network_.link_params(from, to);
  if (rng_.chance(params.loss)) {
    ++stats_.lost;
    return;
  }
  simulator_.after(hop_delay(params), [this, path, at, seq, message] { arrive_hop(path, at, seq, message); });
}

void IdealRouting::arrive_hop(const Path& path, size_t at, uint64_t seq, const core::Message& message) {
  const size_t from = (*path)[at];
  const size_t to = (*path)[at + 1];
  if (!network_.node_up(Network::address_of(to))) {
    ++stats_.dropped;
    return;
  }
  if (seq != 0) {
    // Every copy is acked, over the reverse link; only the first goes on.
    ++stats_.hop_acks;
    stats_.hop_bytes += routing::encode_hop_ack(seq).size();
    const LinkParams back = *network_.link_params(Network::address_of(to), Network::address_of(from));
    if (rng_.chance(back.loss)) {
      ++stats_.lost;
    } else {
      simulator_.after(hop_delay(back), [this, from, seq] {
        if (network_.node_up(Network::address_of(from))) hop_arq(from).on_ack(seq);
      });
    }
    if (!hop_arq(to).first_arrival(Network::address_of(from), seq)) return;
  }
  if (at + 2 < path->size()) {
    send_hop(path, at + 1, message);
    return;
  }
  core::Message delivered = message;
  delivered.hops = static_cast<uint32_t>(path->size() - 1);
  delivered.ttl -= delivered.hops;
  arrive(to, delivered);
}

core::Duration IdealRouting::hop_delay(const LinkParams& params) {
  core::Duration delay = params.delay;
  if (params.jitter.count() > 0) {
    delay += core::Duration(static_cast<int64_t>(rng_.below(static_cast<uint64_t>(params.jitter.count()) + 1)));
  }
  return delay;
}

core::SendStatus IdealRouting::flood_from(NodeTransport& sender, core::Message message) {
  message.src = sender.self();
  message.dst = core::kEveryNode;
  if (message.ttl == 0) message.ttl = default_ttl_;
  message.hops = 0;
  std::optional<core::Message> wire = through_codec(sender, message);
  if (!wire) return core::SendStatus::too_large;
  std::vector<std::optional<size_t>> parent = bfs_parents(sender.index());
  for (size_t to = 0; to < parent.size(); ++to) {
    if (to == sender.index() || !parent[to]) continue;
    ++stats_.sent;
    carry(parent, sender.index(), to, *wire);
  }
  return core::SendStatus::sent;
}

std::optional<core::Message> IdealRouting::through_codec(const NodeTransport& sender,
                                                        const core::Message& message) const {
  std::string encoded = routing::encode_envelope(message);
  if (encoded.size() > network_.link(sender.self(), Channel::agent).max_datagram_size()) return std::nullopt;
  auto decoded = routing::decode_envelope(core::ByteSpan(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size()));
  if (!decoded) {
    // A body type missing from wire.proto's oneof is a bug in the caller's
    // layer, not a network condition to model.
    throw std::logic_error("IdealRouting: message from " + sender.self().to_string() + " with body type " +
                           std::to_string(message.body_type) + " does not survive the Envelope codec: " +
                           std::string(routing::to_string(decoded.error())));
  }
  return *decoded;
}

void IdealRouting::carry(const std::vector<std::optional<size_t>>& parents, size_t from, size_t to,
                         core::Message message) {
  std::vector<size_t> path;  // reversed: `to` first, the hop after `from` last
  for (size_t v = to; v != from; v = *parents[v]) path.push_back(v);
  if (path.size() > message.ttl) {
    ++stats_.unroutable;
    return;
  }
  size_t bytes = routing::encode_envelope(message).size();
  core::Duration delay{};
  size_t previous = from;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    LinkParams params = *network_.link_params(Network::address_of(previous), Network::address_of(*it));
    ++stats_.hop_transmissions;
    stats_.hop_bytes += bytes;
    if (rng_.chance(params.loss)) {
      ++stats_.lost;
      return;
    }
    delay += hop_delay(params);
    previous = *it;
  }
  // Hop count and remaining TTL as forwarders would have rewritten them.
  message.hops = static_cast<uint32_t>(path.size());
  message.ttl -= message.hops;
  simulator_.after(delay, [this, to, message = std::move(message)] { arrive(to, message); });
}

void IdealRouting::arrive(size_t to, const core::Message& message) {
  core::NodeId id = Network::address_of(to);
  auto it = transports_.find(id);
  if (!network_.node_up(id) || it == transports_.end() || !it->second->receiver()) {
    ++stats_.dropped;
    return;
  }
  ++stats_.delivered;
  it->second->receiver()(message);
}

}  // namespace mesh::sim
