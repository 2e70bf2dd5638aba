#include "core/rtt_estimator.h"

#include <algorithm>

namespace mesh::core {

RttEstimator::RttEstimator(Options options) : options_(options) {
  options_.capacity = std::max<size_t>(options_.capacity, 1);
  options_.cap = std::max(options_.cap, options_.floor);
}

Duration RttEstimator::rto_of(const Peer& peer) const {
  const Duration computed = peer.srtt + std::max(options_.granularity, 4 * peer.rttvar);
  return std::clamp(std::max(computed, peer.backoff), options_.floor, options_.cap);
}

void RttEstimator::forget(std::unordered_map<NodeId, Peer>::iterator it) {
  recency_.erase(it->second.recency);
  peers_.erase(it);
}

std::optional<Duration> RttEstimator::rto(NodeId dst, TimePoint now) {
  auto it = peers_.find(dst);
  if (it == peers_.end()) return std::nullopt;
  if (now - it->second.heard >= options_.forget_after) {
    forget(it);
    return std::nullopt;
  }
  return rto_of(it->second);
}

void RttEstimator::on_answer(NodeId dst, Duration rtt, uint32_t transmissions, TimePoint now) {
  if (transmissions != 1) return;
  rtt = std::max(rtt, Duration::zero());
  auto it = peers_.find(dst);
  if (it != peers_.end() && now - it->second.heard >= options_.forget_after) {
    forget(it);
    it = peers_.end();
  }
  if (it == peers_.end()) {
    if (peers_.size() >= options_.capacity) forget(peers_.find(recency_.back()));
    recency_.push_front(dst);
    Peer peer;
    peer.srtt = rtt;
    peer.rttvar = rtt / 2;
    peer.heard = now;
    peer.recency = recency_.begin();
    peers_.emplace(dst, peer);
    return;
  }
  Peer& peer = it->second;
  const Duration error = peer.srtt > rtt ? peer.srtt - rtt : rtt - peer.srtt;
  peer.rttvar = (3 * peer.rttvar + error) / 4;
  peer.srtt = (7 * peer.srtt + rtt) / 8;
  peer.backoff = Duration::zero();
  peer.heard = now;
  recency_.splice(recency_.begin(), recency_, peer.recency);
}

void RttEstimator::on_timeout(NodeId dst, Duration waited) {
  auto it = peers_.find(dst);
  if (it == peers_.end()) return;
  it->second.backoff = std::min(std::max(it->second.backoff, 2 * waited), options_.cap);
}

std::optional<RttEstimator::PeerState> RttEstimator::state(NodeId dst) const {
  auto it = peers_.find(dst);
  if (it == peers_.end()) return std::nullopt;
  return PeerState{it->second.srtt, it->second.rttvar, it->second.backoff, rto_of(it->second)};
}

}  // namespace mesh::core
