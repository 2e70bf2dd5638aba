#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/metrics.h"
#include "core/rng.h"
#include "core/transport.h"
#include "routing/hop_arq.h"
#include "sim/network.h"
#include "sim/sim_env.h"
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
//
// With enable_hop_arq(), unicast messages cross their path one hop at a time
// under hop-by-hop ARQ, run by the same routing::HopArq the agent's
// OlsrTransport uses (one per node, on a SimEnv of its own): each hop is
// acknowledged over the reverse link (with its loss and delay) and
// retransmitted after the HopArq's timeout, and a forwarder or destination
// hands on only the first copy. A node that is down sends and forwards
// nothing; its ARQ state outlives a crash here (a shortcut of the model: a
// restarted agent starts afresh). Floods never use it, as in the transport.
class IdealRouting {
 public:
  struct Stats {
    uint64_t sent = 0;          // messages accepted by send() or flood() (a flood counts once per receiver)
    uint64_t delivered = 0;
    uint64_t lost = 0;          // dropped by a hop's loss draw
    uint64_t unroutable = 0;    // no path, or longer than the TTL
    uint64_t dropped = 0;       // receiver down or without a receiver on arrival
    uint64_t hop_transmissions = 0;  // hop ARQ retransmissions included
    uint64_t hop_acks = 0;           // link-level acks put on the air by the hop ARQ
    uint64_t hop_bytes = 0;          // encoded Envelope bytes times hops crossed, acks included
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

  // Turns hop-by-hop ARQ on for every unicast message sent from now on
  // (options.enabled is implied).
  void enable_hop_arq(routing::HopArq::Options options);
  // The ARQ's counters (transport_hop_*_total), summed over all nodes.
  const core::Metrics& hop_arq_metrics() const { return hop_arq_metrics_; }

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
  // A hop's delay: the link's plus its uniform jitter.
  core::Duration hop_delay(const LinkParams& params);

  // Hop-by-hop ARQ: the message at path[at], to go to path[at + 1].
  using Path = std::shared_ptr<const std::vector<size_t>>;
  void send_hop(const Path& path, size_t at, core::Message message);
  // One transmission of that hop, carrying hop_seq `seq` (0: unacknowledged).
  void transmit_hop(const Path& path, size_t at, uint64_t seq, size_t bytes, const core::Message& message);
  void arrive_hop(const Path& path, size_t at, uint64_t seq, const core::Message& message);
  routing::HopArq& hop_arq(size_t node);
  struct ArqNode {
    std::unique_ptr<SimEnv> env;
    std::unique_ptr<routing::HopArq> arq;  // after env: destroyed first, cancelling its timers
  };

  Simulator& simulator_;
  Network& network_;
  uint64_t seed_;
  core::Rng rng_;
  uint32_t default_ttl_ = 32;
  std::optional<routing::HopArq::Options> hop_arq_options_;
  core::Metrics hop_arq_metrics_;
  std::vector<ArqNode> arq_nodes_;  // by node index, created on first use
  std::unordered_map<core::NodeId, std::unique_ptr<NodeTransport>> transports_;
  Stats stats_;
};

}  // namespace mesh::sim
