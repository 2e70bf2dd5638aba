#pragma once

#include <algorithm>
#include <cstdint>

#include "core/env.h"
#include "core/rng.h"
#include "core/timer_queue.h"

namespace mesh::test_support {

// Virtual time that moves only when a test says so: unit tests of sans-IO
// code drive timers deterministically with advance(), without the
// simulator's network.
class ManualEnv : public core::Env {
 public:
  explicit ManualEnv(uint64_t seed = 1) : rng_(seed) {}

  core::TimePoint now() const override { return now_; }
  core::Rng& rng() override { return rng_; }

  // Runs every timer due up to now() + d, each at its own deadline.
  void advance(core::Duration d) {
    const core::TimePoint until = now_ + d;
    while (auto next = queue_.next_deadline()) {
      if (*next > until) break;
      now_ = *next;
      queue_.run_one(now_);
    }
    now_ = until;
  }

 protected:
  core::TimerId schedule_one_shot(core::Duration delay, Callback cb) override {
    return queue_.schedule(now_ + std::max(delay, core::Duration::zero()), std::move(cb));
  }
  void cancel_one_shot(core::TimerId id) override { queue_.cancel(id); }

 private:
  core::TimePoint now_{};
  core::TimerQueue queue_;
  core::Rng rng_;
};

}  // namespace mesh::test_support
