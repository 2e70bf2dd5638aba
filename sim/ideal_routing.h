#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/rng.h"
#include "core/transport.h"
#include "sim/network.h"
#include "sim/simulator.h"

namespace mesh::sim {

// End-to-end transports with perfect routing, for testing the layers above
// routing (membership, k-groups, Camera) without waiting for OLSR to
// converge, as the papers' own simulations do. A message follows a shortest
// path over the Network as it is at send time (links up, nodes up, no
// partition between hops); each hop applies that link's loss and delay plus
// uniform jitter. Messages go through the real Envelope codec both ways, so
// a body that would not survive the wire does not survive here either.
//
// Paths are chosen when a message is sent: a link that fails while the
// message is in flight does not stop it, a receiver that is down when it
// arrives does.
class IdealRouting {
 public:
  struct Stats {
    uint64_t sent = 0;          // messages accepted by send() or flood() (a flood counts once per receiver)
    uint64_t delivered = 0;
    uint64_t lost = 0;          // dropped by a hop's loss draw
    uint64_t unroutable = 0;    // no path, or longer than the TTL
    uint64_t dropped = 0;       // receiver down or without a receiver on arrival
    uint64_t hop_transmissions = 0;
    uint64_t hop_bytes = 0;     // encoded Envelope bytes times hops crossed
  };

  // `seed` drives loss and jitter draws only.
  IdealRouting(Simulator& simulator, Network& network, uint64_t seed);
  IdealRouting(const IdealRouting&) = delete;
  IdealRouting& operator=(const IdealRouting&) = delete;
  ~IdealRouting();

  // The transport of the node with this address (created on first use; lives
  // as long as this object). After a crash the owner builds new protocol
  // objects that call set_receiver() again; until then arrivals are dropped.
  core::Transport& transport(core::NodeId id);

  // Hops on a current shortest path, nullopt when unreachable.
  std::optional<uint32_t> hops(core::NodeId from, core::NodeId to) const;

  const Stats& stats() const { return stats_; }
  uint32_t default_ttl() const { return default_ttl_; }
  void set_default_ttl(uint32_t ttl) { default_ttl_ = ttl; }

 private:
  class NodeTransport;

  // Parent of every node reachable from `from` on a BFS tree (neighbours in
  // index order, so paths are deterministic); parent of `from` is itself.
  std::vector<std::optional<size_t>> bfs_parents(size_t from) const;
  bool hop_usable(size_t a, size_t b) const;
  core::SendStatus send_from(NodeTransport& sender, core::Message message);
  core::SendStatus flood_from(NodeTransport& sender, core::Message message);
  // The message as a receiver would decode it; nullopt if too large.
  std::optional<core::Message> through_codec(const NodeTransport& sender, const core::Message& message) const;
  // Walks the path to `to`, drawing loss and delay per hop; schedules the arrival.
  void carry(const std::vector<std::optional<size_t>>& parents, size_t from, size_t to, core::Message message);
  void arrive(size_t to, const core::Message& message);

  Simulator& simulator_;
  Network& network_;
  core::Rng rng_;
  uint32_t default_ttl_ = 32;
  std::unordered_map<core::NodeId, std::unique_ptr<NodeTransport>> transports_;
  Stats stats_;
};

}  // namespace mesh::sim
