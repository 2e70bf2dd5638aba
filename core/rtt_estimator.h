#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <unordered_map>

#include "core/node_id.h"
#include "core/time.h"

namespace mesh::core {

// Per-destination retransmission timeouts, computed as RFC 6298 computes
// TCP's, from the round trips of answered requests. Sans-IO: the caller
// passes the time.
//
// Algorithm (RFC 6298 §2, alpha = 1/8, beta = 1/4, K = 4):
//   first sample R:  SRTT = R, RTTVAR = R / 2
//   later sample R:  RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, then SRTT = 7/8 SRTT + 1/8 R
//   RTO = SRTT + max(G, 4 RTTVAR), clamped to [floor, cap]
// Karn's rule (§3): a request answered after a retransmission gives no
// sample, because the answer cannot tell which transmission it answers
// (counting it against the first would inflate SRTT, against the last would
// deflate it below the true round trip and cause spurious retransmissions).
// Backoff (§5.5): when a retransmission timer for a destination expires
// after waiting w, later requests to it wait at least 2w (up to the cap)
// until a new valid sample arrives, which ends the backoff (§5.7 keeps the
// computed RTO). Taking the larger of 2w and the current backoff, instead
// of doubling per expiry, keeps many requests timing out at once to the
// same peer from compounding the backoff beyond what one lost round proves.
// Without any fresh sample there is no RTO (rto() is empty): the caller
// uses its own initial timeout, as RFC 6298 §2.1 uses 1 s.
//
// Memory is bounded: at most `capacity` destinations, the one heard from
// least recently evicted first; a destination not heard from for
// `forget_after` is measured afresh (routes change, a stale SRTT is a guess).
//
// Safety: the estimate only chooses when a request is retransmitted, never
// whether it is answered or when its caller gives up (the deadline), and
// receivers deduplicate retransmissions, so a wrong estimate costs traffic
// (too short) or latency under loss (too long), never correctness.
class RttEstimator {
 public:
  struct Options {
    // No RTO below this: a handler's processing time and a busy radio add
    // delay the samples of an idle path do not show.
    Duration floor = std::chrono::milliseconds(10);
    // No RTO (backoff included) above this.
    Duration cap = std::chrono::seconds(2);
    // G of RFC 6298: the timer granularity, the least margin over SRTT.
    Duration granularity = std::chrono::milliseconds(1);
    Duration forget_after = std::chrono::minutes(10);
    size_t capacity = 1024;
  };

  // One destination's estimate, for metrics and tests.
  struct PeerState {
    Duration srtt{};
    Duration rttvar{};
    Duration backoff{};  // zero when not backed off
    Duration rto{};      // what rto() returns
  };

  explicit RttEstimator(Options options);

  // The retransmission timeout for dst, or empty without a fresh sample.
  std::optional<Duration> rto(NodeId dst, TimePoint now);
  // A request to dst was answered `rtt` after its latest transmission, made
  // after `transmissions` transmissions in all; only a first transmission's
  // answer is a sample (Karn).
  void on_answer(NodeId dst, Duration rtt, uint32_t transmissions, TimePoint now);
  // A retransmission timer for a request to dst expired after `waited`.
  void on_timeout(NodeId dst, Duration waited);

  std::optional<PeerState> state(NodeId dst) const;
  size_t size() const { return peers_.size(); }

 private:
  struct Peer {
    Duration srtt{};
    Duration rttvar{};
    Duration backoff{};
    TimePoint heard{};
    std::list<NodeId>::iterator recency;  // position in recency_
  };
  Duration rto_of(const Peer& peer) const;
  void forget(std::unordered_map<NodeId, Peer>::iterator it);

  Options options_;
  std::unordered_map<NodeId, Peer> peers_;
  std::list<NodeId> recency_;  // most recently heard first
};

}  // namespace mesh::core
