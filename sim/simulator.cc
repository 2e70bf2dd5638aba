#include "sim/simulator.h"

#include <algorithm>
#include <utility>

namespace mesh::sim {

Simulator::Simulator(uint64_t seed) : seed_(seed), rng_(seed) {}

core::TimerId Simulator::at(core::TimePoint when, Callback callback) {
  return queue_.schedule(std::max(when, now_), std::move(callback));
}

core::TimerId Simulator::after(core::Duration delay, Callback callback) {
  return at(now_ + std::max(delay, core::Duration::zero()), std::move(callback));
}

bool Simulator::cancel(core::TimerId id) { return queue_.cancel(id); }

bool Simulator::step() {
  const auto next = queue_.next_deadline();
  if (!next) return false;
  now_ = std::max(now_, *next);
  if (!queue_.run_one(now_)) return false;
  ++events_processed_;
  return true;
}

size_t Simulator::run_until(core::TimePoint until) {
  size_t ran = 0;
  while (true) {
    const auto next = queue_.next_deadline();
    if (!next || *next > until) break;
    now_ = std::max(now_, *next);
    if (!queue_.run_one(now_)) break;
    ++events_processed_;
    ++ran;
  }
  now_ = std::max(now_, until);
  return ran;
}

}  // namespace mesh::sim
