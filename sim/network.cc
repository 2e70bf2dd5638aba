#include "sim/network.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/running_node.h"

namespace mesh::sim {

NetworkStats& NetworkStats::operator+=(const NetworkStats& o) {
  sent += o.sent;
  delivered += o.delivered;
  lost += o.lost;
  dropped += o.dropped;
  unroutable += o.unroutable;
  oversize += o.oversize;
  bytes_sent += o.bytes_sent;
  bytes_delivered += o.bytes_delivered;
  return *this;
}

class Network::SimLink final : public core::Link {
 public:
  SimLink(Network& network, size_t index, Channel channel) : network_(network), index_(index), channel_(channel) {}

  core::Ipv4Address local_address() const override { return network_.nodes_[index_].id; }
  void broadcast(core::ByteSpan datagram) override { network_.send_from(index_, channel_, std::nullopt, datagram); }
  void send(core::Ipv4Address neighbour, core::ByteSpan datagram) override {
    network_.send_from(index_, channel_, neighbour, datagram);
  }
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

  const Receiver& receiver() const { return receiver_; }

 private:
  Network& network_;
  size_t index_;
  Channel channel_;
  Receiver receiver_;
};

core::NodeId Network::address_of(size_t index) {
  return core::Ipv4Address::from_octets(10, 0, static_cast<uint8_t>(index / 250),
                                        static_cast<uint8_t>(index % 250 + 1));
}

Network::Network(Simulator& simulator, uint64_t seed) : simulator_(simulator), rng_(seed) {}

Network::~Network() = default;

core::NodeId Network::add_node() {
  const size_t index = nodes_.size();
  if (index >= 250 * 256) throw std::length_error("sim::Network: at most 64000 nodes");
  NodeState state;
  state.id = address_of(index);
  for (size_t c = 0; c < kChannelCount; ++c)
    state.links[c] = std::make_unique<SimLink>(*this, index, static_cast<Channel>(c));
  nodes_.push_back(std::move(state));
  index_of_.emplace(nodes_.back().id, index);
  return nodes_.back().id;
}

std::optional<size_t> Network::index_of(core::NodeId id) const {
  auto it = index_of_.find(id);
  if (it == index_of_.end()) return std::nullopt;
  return it->second;
}

size_t Network::index_or_throw(core::NodeId id) const {
  auto index = index_of(id);
  if (!index) throw std::out_of_range("sim::Network: unknown node " + id.to_string());
  return *index;
}

const LinkParams* Network::find_link(size_t a, size_t b) const {
  const auto& adjacent = nodes_[a].adjacent;
  auto it = std::lower_bound(adjacent.begin(), adjacent.end(), b,
                             [](const Adjacent& x, size_t n) { return x.neighbour < n; });
  if (it == adjacent.end() || it->neighbour != b) return nullptr;
  return &links_[it->link];
}

void Network::connect(core::NodeId a, core::NodeId b, LinkParams params) {
  const size_t ia = index_or_throw(a);
  const size_t ib = index_or_throw(b);
  if (ia == ib) throw std::invalid_argument("sim::Network: a link needs two distinct nodes");
  if (const LinkParams* existing = find_link(ia, ib)) {
    links_[static_cast<size_t>(existing - links_.data())] = params;
    return;
  }
  const size_t link = links_.size();
  links_.push_back(params);
  for (auto [from, to] : {std::pair{ia, ib}, std::pair{ib, ia}}) {
    auto& adjacent = nodes_[from].adjacent;
    auto it = std::lower_bound(adjacent.begin(), adjacent.end(), to,
                               [](const Adjacent& x, size_t n) { return x.neighbour < n; });
    adjacent.insert(it, Adjacent{to, link});
  }
}

bool Network::has_link(core::NodeId a, core::NodeId b) const {
  auto ia = index_of(a);
  auto ib = index_of(b);
  return ia && ib && find_link(*ia, *ib) != nullptr;
}

bool Network::set_link_up(core::NodeId a, core::NodeId b, bool up) {
  auto ia = index_of(a);
  auto ib = index_of(b);
  if (!ia || !ib) return false;
  const LinkParams* params = find_link(*ia, *ib);
  if (!params) return false;
  links_[static_cast<size_t>(params - links_.data())].up = up;
  return true;
}

std::optional<LinkParams> Network::link_params(core::NodeId a, core::NodeId b) const {
  auto ia = index_of(a);
  auto ib = index_of(b);
  if (!ia || !ib) return std::nullopt;
  const LinkParams* params = find_link(*ia, *ib);
  if (!params) return std::nullopt;
  return *params;
}

std::vector<core::NodeId> Network::neighbours(core::NodeId id) const {
  std::vector<core::NodeId> out;
  for (const Adjacent& adjacent : nodes_[index_or_throw(id)].adjacent) out.push_back(nodes_[adjacent.neighbour].id);
  return out;
}

core::Link& Network::link(core::NodeId id, Channel channel) {
  return *nodes_[index_or_throw(id)].links[static_cast<size_t>(channel)];
}

void Network::partition(const std::vector<std::vector<core::NodeId>>& groups) {
  for (auto& node : nodes_) node.group = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (core::NodeId id : groups[g]) nodes_[index_or_throw(id)].group = g + 1;
  }
}

void Network::heal() {
  for (auto& node : nodes_) node.group = 0;
}

bool Network::can_talk(core::NodeId a, core::NodeId b) const {
  return nodes_[index_or_throw(a)].group == nodes_[index_or_throw(b)].group;
}

void Network::set_node_up(core::NodeId id, bool up) { nodes_[index_or_throw(id)].up = up; }

bool Network::node_up(core::NodeId id) const { return nodes_[index_or_throw(id)].up; }

NetworkStats Network::total_stats() const {
  NetworkStats total;
  for (const auto& s : stats_) total += s;
  return total;
}

void Network::send_from(size_t from, Channel channel, std::optional<core::NodeId> to, core::ByteSpan datagram) {
  NetworkStats& stats = stats_[static_cast<size_t>(channel)];
  if (!nodes_[from].up) return;
  if (datagram.size() > nodes_[from].links[static_cast<size_t>(channel)]->max_datagram_size()) {
    ++stats.oversize;
    return;
  }
  if (!to) {
    if (send_observer_) send_observer_(from, channel, datagram);
    for (const Adjacent& adjacent : nodes_[from].adjacent) {
      if (links_[adjacent.link].up) transmit(from, adjacent.neighbour, adjacent.link, channel, datagram);
    }
    return;
  }
  auto target = index_of(*to);
  const LinkParams* params = target ? find_link(from, *target) : nullptr;
  if (!params || !params->up) {
    ++stats.unroutable;
    return;
  }
  if (send_observer_) send_observer_(from, channel, datagram);
  transmit(from, *target, static_cast<size_t>(params - links_.data()), channel, datagram);
}

void Network::transmit(size_t from, size_t to, size_t link, Channel channel, core::ByteSpan datagram) {
  NetworkStats& stats = stats_[static_cast<size_t>(channel)];
  const LinkParams& params = links_[link];
  ++stats.sent;
  stats.bytes_sent += datagram.size();
  // Both draws are made for every copy, lost or not, so one link's loss
  // setting does not shift the jitter of every later datagram.
  const bool lost = rng_.chance(params.loss);
  const int64_t jitter = params.jitter.count() > 0 ? rng_.between(0, params.jitter.count()) : 0;
  if (lost) {
    ++stats.lost;
    return;
  }
  simulator_.after(params.delay + core::Duration(jitter),
                   [this, from, to, link, channel, copy = std::vector<uint8_t>(datagram.begin(), datagram.end())] {
                     deliver(from, to, link, channel, copy);
                   });
}

void Network::deliver(size_t from, size_t to, size_t link, Channel channel, const std::vector<uint8_t>& datagram) {
  NetworkStats& stats = stats_[static_cast<size_t>(channel)];
  const NodeState& receiver = nodes_[to];
  const auto& handler = receiver.links[static_cast<size_t>(channel)]->receiver();
  if (!links_[link].up || !receiver.up || receiver.group != nodes_[from].group || !handler) {
    ++stats.dropped;
    return;
  }
  ++stats.delivered;
  stats.bytes_delivered += datagram.size();
  // Copy: the receiver may replace itself (a node restarting) while running.
  const core::Link::Receiver run = handler;
  const RunningNodeScope running(static_cast<int32_t>(to));
  run(nodes_[from].id, core::ByteSpan(datagram.data(), datagram.size()));
}

}  // namespace mesh::sim
