#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/rng.h"
#include "core/time.h"
#include "core/timer_queue.h"

namespace mesh::sim {

// Discrete-event core: a virtual clock and a queue of callbacks. Time jumps
// from one event to the next; events due at the same instant run in the
// order they were scheduled (core::TimerQueue's guarantee), so a run is a
// pure function of what was scheduled and the seed.
class Simulator {
 public:
  using Callback = std::function<void()>;

  // While it lives, log messages carry its virtual time (core::log_with_clock).
  explicit Simulator(uint64_t seed);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  core::TimePoint now() const { return now_; }
  uint64_t seed() const { return seed_; }
  // Randomness of the simulated world itself (workload, start offsets);
  // nodes and the network draw from their own generators.
  core::Rng& rng() { return rng_; }

  // A time in the past means now (after the events already due now).
  core::TimerId at(core::TimePoint when, Callback callback);
  core::TimerId after(core::Duration delay, Callback callback);
  // False if the event already ran or was cancelled.
  bool cancel(core::TimerId id);

  // Runs the next event, moving the clock to its time. False when idle.
  bool step();
  // Runs every event due at or before `until`, then sets the clock to
  // `until` (never backwards). Returns how many events ran.
  size_t run_until(core::TimePoint until);
  size_t run_for(core::Duration duration) { return run_until(now_ + duration); }

  uint64_t events_processed() const { return events_processed_; }
  size_t pending_events() const { return queue_.size(); }

 private:
  uint64_t seed_;
  core::Rng rng_;
  core::TimePoint now_{};
  core::TimerQueue queue_;
  uint64_t events_processed_ = 0;
  uint64_t log_clock_token_ = 0;
};

}  // namespace mesh::sim
