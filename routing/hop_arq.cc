#include "routing/hop_arq.h"

#include <algorithm>

namespace mesh::routing {
namespace {

core::RttEstimator::Options estimator_options(const HopArq::Options& options) {
  core::RttEstimator::Options o;
  o.floor = options.rto_floor;
  o.cap = options.rto_cap;
  return o;
}

}  // namespace

HopArq::HopArq(core::Env& env, core::Metrics& metrics, Options options)
    : env_(env),
      options_(options),
      rtt_(estimator_options(options)),
      retransmitted_(metrics.counter("transport_hop_retransmitted_total")),
      acked_(metrics.counter("transport_hop_acked_total")),
      gave_up_(metrics.counter("transport_hop_gave_up_total")),
      duplicates_(metrics.counter("transport_hop_duplicates_total")) {}

HopArq::~HopArq() {
  for (auto& [seq, pending] : pending_) env_.cancel_timer(pending.timer);
}

uint64_t HopArq::next_seq() {
  if (!options_.enabled || pending_.size() >= options_.max_pending) return 0;
  // Drawn on first use, not at construction: with the ARQ off the node's
  // random stream, and so every seeded run, stays what it was without it.
  if (!next_seq_) next_seq_ = env_.rng().next_u64();
  // 0 means "no ack wanted" on the wire.
  if (++*next_seq_ == 0) ++*next_seq_;
  return *next_seq_;
}

void HopArq::track(uint64_t seq, core::Ipv4Address next_hop, Retransmit retransmit) {
  if (seq == 0) return;
  auto [it, inserted] = pending_.try_emplace(seq);
  if (!inserted) return;
  Pending& pending = it->second;
  pending.next_hop = next_hop;
  pending.retransmit = std::move(retransmit);
  pending.last_sent = env_.now();
  arm(seq, pending, rtt_.rto(next_hop, env_.now()).value_or(options_.initial_rto));
}

void HopArq::arm(uint64_t seq, Pending& pending, core::Duration wait) {
  pending.wait = wait;
  pending.timer = env_.start_timer(wait, [this, seq] { on_timeout(seq); });
}

void HopArq::on_timeout(uint64_t seq) {
  auto it = pending_.find(seq);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  pending.timer = core::kNoTimer;
  rtt_.on_timeout(pending.next_hop, pending.wait);
  if (pending.transmissions > options_.max_retransmissions) {
    gave_up_.add();
    pending_.erase(it);
    return;
  }
  ++pending.transmissions;
  pending.last_sent = env_.now();
  retransmitted_.add();
  // Before the retransmission, which may reenter (a simulated link that
  // acks at once) and erase this entry.
  const core::Duration wait = rtt_.rto(pending.next_hop, env_.now())
                                  .value_or(std::min(2 * pending.wait, std::max(options_.rto_cap, options_.rto_floor)));
  arm(seq, pending, wait);
  Retransmit retransmit = pending.retransmit;
  retransmit();
}

void HopArq::on_ack(uint64_t seq) {
  auto it = pending_.find(seq);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  // Karn: the estimator takes only an ack of a datagram sent once.
  rtt_.on_answer(pending.next_hop, env_.now() - pending.last_sent, pending.transmissions, env_.now());
  env_.cancel_timer(pending.timer);
  acked_.add();
  pending_.erase(it);
}

bool HopArq::first_arrival(core::Ipv4Address previous_hop, uint64_t seq) {
  const core::TimePoint now = env_.now();
  forget_arrivals(now);
  const ArrivalKey key{previous_hop, seq};
  if (!arrivals_.insert(key).second) {
    duplicates_.add();
    return false;
  }
  arrival_order_.emplace_back(now + options_.dedupe_hold, key);
  return true;
}

void HopArq::forget_arrivals(core::TimePoint now) {
  // Leave room for the arrival about to be added.
  const size_t capacity = std::max<size_t>(options_.dedupe_capacity, 1);
  while (!arrival_order_.empty() && (arrival_order_.front().first <= now || arrivals_.size() >= capacity)) {
    arrivals_.erase(arrival_order_.front().second);
    arrival_order_.pop_front();
  }
}

}  // namespace mesh::routing
