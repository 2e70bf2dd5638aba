#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/log.h"

namespace mesh::sim {

Simulator::Simulator(uint64_t seed) : seed_(seed), rng_(seed) {
  log_clock_token_ =
      core::log_with_clock([this] { return std::chrono::duration<double>(now_.time_since_epoch()).count(); });
}

Simulator::~Simulator() { core::stop_log_clock(log_clock_token_); }

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
