#include "core/env.h"

#include <utility>

namespace mesh::core {

TimerId Env::start_periodic(Duration period, Callback callback) {
  const TimerId id = next_periodic_id_++;
  periodic_.emplace(id, Periodic{period, std::move(callback), kNoTimer});
  arm(id);
  return id;
}

void Env::arm(TimerId periodic_id) {
  auto it = periodic_.find(periodic_id);
  if (it == periodic_.end()) return;
  it->second.current = start_timer(it->second.period, [this, periodic_id] {
    auto found = periodic_.find(periodic_id);
    if (found == periodic_.end()) return;
    found->second.current = kNoTimer;
    // Re-arm before running so the callback may cancel its own timer.
    arm(periodic_id);
    // Copy: the callback may cancel itself, which erases the entry.
    Callback callback = found->second.callback;
    callback();
  });
}

void Env::cancel_timer(TimerId id) {
  if (id == kNoTimer) return;
  auto it = periodic_.find(id);
  if (it == periodic_.end()) {
    cancel_one_shot(id);
    return;
  }
  const TimerId current = it->second.current;
  periodic_.erase(it);
  if (current != kNoTimer) cancel_one_shot(current);
}

void ScopedTimer::start(Duration delay, Env::Callback callback) {
  cancel();
  id_ = env_->start_timer(delay, [this, callback = std::move(callback)] {
    id_ = kNoTimer;
    callback();
  });
}

void ScopedTimer::start_periodic(Duration period, Env::Callback callback) {
  cancel();
  id_ = env_->start_periodic(period, std::move(callback));
}

void ScopedTimer::cancel() {
  if (id_ != kNoTimer) env_->cancel_timer(id_);
  id_ = kNoTimer;
}

}  // namespace mesh::core
