#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/env.h"
#include "core/metrics.h"
#include "core/node_id.h"
#include "core/rtt_estimator.h"

namespace mesh::routing {

// Hop-by-hop ARQ: link-level acknowledgements and retransmissions of one
// node's unicast hop datagrams, so a loss on one hop costs one more hop
// transmission instead of an end-to-end retransmission. Over h hops with
// per-hop loss p a datagram arrives with (1-p)^h; a request's round trip
// with (1-p)^2h, and the slowest of many exchanges waits for its end-to-end
// timeout (bench/README.md, "Requests under loss"). With ARQ on each hop it
// arrives unless one hop loses it max_retransmissions + 1 times in a row.
//
// Sender: each tracked datagram gets a hop sequence number (hop_seq on the
// wire); the first is drawn at random, so a restarted node does not reuse
// the numbers its neighbours still remember. Unacknowledged after the next
// hop's RTO, it is retransmitted unchanged (same hop_seq), up to
// max_retransmissions times, then given up silently: end-to-end reliability
// stays the Messenger's. The RTO is RFC 6298's (core::RttEstimator) on the
// one-hop round trip from transmission to ack, with a floor, Karn's rule
// and doubling after a timeout; initial_rto until the neighbour is measured.
//
// Receiver: a datagram asking for an ack is acknowledged every time, even a
// duplicate, so a lost ack is repaired by the retransmission it causes; it
// is handed on only the first time, remembered by (previous hop, hop_seq)
// for dedupe_hold. A retransmission arrives within about
// (max_retransmissions + 1) * rto_cap of the first transmission, so
// dedupe_hold must exceed that (the default is ten times it), and
// dedupe_capacity must hold every datagram received within it; beyond
// capacity the oldest are forgotten first.
//
// Sans-IO: timers through core::Env, datagrams through the caller's
// retransmit callbacks. Counters: transport_hop_retransmitted_total,
// transport_hop_acked_total, transport_hop_gave_up_total,
// transport_hop_duplicates_total.
class HopArq {
 public:
  struct Options {
    // Off by default in this first landing: every existing sweep and
    // benchmark runs unchanged, and on real 802.11 unicast the MAC already
    // acknowledges and retransmits each frame, so ARQ here only doubles it.
    // Turn it on for lossy links without link-layer retransmission (802.11
    // broadcast-rate links, some USB/serial radios, the simulator).
    bool enabled = false;
    // Retransmissions of one hop datagram before it is given up.
    uint32_t max_retransmissions = 3;
    // The wait before a neighbour's first ack has been measured.
    core::Duration initial_rto = std::chrono::milliseconds(100);
    // No wait below this: a busy radio and the receiver's processing add
    // delay the samples of an idle link do not show.
    core::Duration rto_floor = std::chrono::milliseconds(10);
    core::Duration rto_cap = std::chrono::seconds(1);
    core::Duration dedupe_hold = std::chrono::seconds(40);
    size_t dedupe_capacity = 16384;
    // Datagrams awaiting an ack at once; beyond it new ones go unacknowledged.
    size_t max_pending = 4096;
  };
  // Puts the same datagram on the air again.
  using Retransmit = std::function<void()>;

  HopArq(core::Env& env, core::Metrics& metrics, Options options);
  ~HopArq();
  HopArq(const HopArq&) = delete;
  HopArq& operator=(const HopArq&) = delete;

  bool enabled() const { return options_.enabled; }

  // The hop_seq for a datagram about to be sent to a neighbour, or 0 when it
  // goes unacknowledged (ARQ off, or max_pending reached). A nonzero one
  // must be passed to track() once the datagram is sent.
  uint64_t next_seq();
  // The datagram `seq` was just sent to `next_hop`; retransmit it until acked.
  void track(uint64_t seq, core::Ipv4Address next_hop, Retransmit retransmit);
  // An ack of `seq` arrived; an unknown or already acked one is ignored.
  void on_ack(uint64_t seq);

  // A datagram from `previous_hop` asked for an ack of `seq` (the caller
  // acks it either way): true the first time, false for a duplicate.
  bool first_arrival(core::Ipv4Address previous_hop, uint64_t seq);

  // Datagrams awaiting an ack (for tests and status).
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    core::Ipv4Address next_hop;
    Retransmit retransmit;
    uint32_t transmissions = 1;
    core::TimePoint last_sent{};
    core::Duration wait{};
    core::TimerId timer = core::kNoTimer;
  };
  using ArrivalKey = std::pair<core::Ipv4Address, uint64_t>;

  void arm(uint64_t seq, Pending& pending, core::Duration wait);
  void on_timeout(uint64_t seq);
  void forget_arrivals(core::TimePoint now);

  core::Env& env_;
  Options options_;
  core::RttEstimator rtt_;
  std::optional<uint64_t> next_seq_;  // the last one handed out
  std::map<uint64_t, Pending> pending_;
  std::set<ArrivalKey> arrivals_;
  // Arrival order, for expiry and eviction: times only grow.
  std::deque<std::pair<core::TimePoint, ArrivalKey>> arrival_order_;
  core::Counter& retransmitted_;
  core::Counter& acked_;
  core::Counter& gave_up_;
  core::Counter& duplicates_;
};

}  // namespace mesh::routing
