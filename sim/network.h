#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/link.h"
#include "core/node_id.h"
#include "core/rng.h"
#include "core/time.h"
#include "sim/simulator.h"

namespace mesh::sim {

// Each node has one Link per kind of traffic, as the agent has one UDP port
// per kind (OLSR on 698, agent Envelopes on theirs).
enum class Channel { routing = 0, agent = 1 };
inline constexpr size_t kChannelCount = 2;

// One undirected link. Every datagram copy on it is lost independently with
// probability `loss`, else delivered after delay + uniform [0, jitter]; a
// jitter larger than the gap between sends reorders them.
struct LinkParams {
  core::Duration delay = std::chrono::milliseconds(5);
  core::Duration jitter{};
  double loss = 0.0;
  bool up = true;
};

struct NetworkStats {
  uint64_t sent = 0;        // copies put on a link
  uint64_t delivered = 0;   // copies handed to a receiver
  uint64_t lost = 0;        // copies dropped by the link's loss draw
  uint64_t dropped = 0;     // copies dropped: link down, partitioned, receiver crashed, no receiver
  uint64_t unroutable = 0;  // send() to a non-neighbour, or over a link that is down
  uint64_t oversize = 0;    // datagrams above the link's max_datagram_size
  uint64_t bytes_sent = 0;
  uint64_t bytes_delivered = 0;

  NetworkStats& operator+=(const NetworkStats& o);
};

// The in-memory radio: nodes, links between them, partitions and crashes.
// Receivers run from Simulator events, never inside the sender's call.
class Network {
 public:
  // Node index i has address 10.0.(i / 250).(i % 250 + 1).
  static core::NodeId address_of(size_t index);

  // `seed` drives loss and jitter draws only.
  Network(Simulator& simulator, uint64_t seed);
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  // Adds the next node (index = node_count() before the call).
  core::NodeId add_node();
  size_t node_count() const { return nodes_.size(); }
  std::optional<size_t> index_of(core::NodeId id) const;

  // Adds or replaces the link between two distinct nodes.
  void connect(core::NodeId a, core::NodeId b, LinkParams params);
  bool has_link(core::NodeId a, core::NodeId b) const;
  // False if there is no such link.
  bool set_link_up(core::NodeId a, core::NodeId b, bool up);
  std::optional<LinkParams> link_params(core::NodeId a, core::NodeId b) const;
  // Every node with a link to `id` (up or down), sorted by index.
  std::vector<core::NodeId> neighbours(core::NodeId id) const;

  core::Link& link(core::NodeId id, Channel channel);

  // Nodes in different groups cannot hear each other; nodes not listed form
  // one more group together. Replaces any earlier partition.
  void partition(const std::vector<std::vector<core::NodeId>>& groups);
  void heal();
  bool can_talk(core::NodeId a, core::NodeId b) const;

  // A node that is down neither sends nor receives (its datagrams in flight
  // still arrive; ones addressed to it are dropped).
  void set_node_up(core::NodeId id, bool up);
  bool node_up(core::NodeId id) const;

  const NetworkStats& stats(Channel channel) const { return stats_[static_cast<size_t>(channel)]; }
  NetworkStats total_stats() const;

  // Called with every datagram a node puts on the air (a broadcast once,
  // before loss), so a benchmark can classify traffic by what it carries
  // (bench/routine_bench.cc). Empty: nothing is called.
  using SendObserver = std::function<void(size_t from, Channel channel, core::ByteSpan datagram)>;
  void set_send_observer(SendObserver observer) { send_observer_ = std::move(observer); }

 private:
  class SimLink;
  struct Adjacent {
    size_t neighbour;
    size_t link;
  };
  struct NodeState {
    core::NodeId id;
    bool up = true;
    size_t group = 0;
    std::vector<Adjacent> adjacent;  // sorted by neighbour index
    std::array<std::unique_ptr<SimLink>, kChannelCount> links;
  };

  size_t index_or_throw(core::NodeId id) const;
  const LinkParams* find_link(size_t a, size_t b) const;
  void transmit(size_t from, size_t to, size_t link, Channel channel, core::ByteSpan datagram);
  void deliver(size_t from, size_t to, size_t link, Channel channel, const std::vector<uint8_t>& datagram);
  void send_from(size_t from, Channel channel, std::optional<core::NodeId> to, core::ByteSpan datagram);

  Simulator& simulator_;
  core::Rng rng_;
  std::vector<NodeState> nodes_;
  std::vector<LinkParams> links_;
  std::unordered_map<core::NodeId, size_t> index_of_;
  std::array<NetworkStats, kChannelCount> stats_{};
  SendObserver send_observer_;
};

}  // namespace mesh::sim
