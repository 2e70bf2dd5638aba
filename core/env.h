#pragma once

#include <functional>
#include <unordered_map>
#include <utility>

#include "core/rng.h"
#include "core/time.h"
#include "core/timer_queue.h"

namespace mesh::core {

// Everything a protocol may know about the world besides its messages: the
// time, timers and randomness. The agent binds it to asio and the monotonic
// clock, the simulator to virtual time. Protocol code reads no other clock,
// sleeps never and draws no other random numbers.
class Env {
 public:
  using Callback = std::function<void()>;

  virtual ~Env() = default;

  virtual TimePoint now() const = 0;
  virtual Rng& rng() = 0;

  // Runs `callback` once, `delay` from now (a negative delay means now).
  TimerId start_timer(Duration delay, Callback callback) { return schedule_one_shot(delay, std::move(callback)); }
  // Runs `callback` every `period` (first run one period from now) until
  // cancel_timer() on the returned id. The id stays valid across runs.
  TimerId start_periodic(Duration period, Callback callback);
  // Cancelling an unknown, fired or already cancelled timer is harmless.
  void cancel_timer(TimerId id);

 protected:
  // What an implementation provides: one-shot timers. Periodic timers are
  // built here on top of them. Ids must stay below 2^62.
  virtual TimerId schedule_one_shot(Duration delay, Callback callback) = 0;
  virtual void cancel_one_shot(TimerId id) = 0;

 private:
  struct Periodic {
    Duration period;
    Callback callback;
    TimerId current = kNoTimer;
  };
  void arm(TimerId periodic_id);
  std::unordered_map<TimerId, Periodic> periodic_;
  TimerId next_periodic_id_ = TimerId{1} << 62;
};

// A timer owned by an object: cancelled when replaced or destroyed, so a
// callback never outlives the object that scheduled it.
class ScopedTimer {
 public:
  explicit ScopedTimer(Env& env) : env_(&env) {}
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  ~ScopedTimer() { cancel(); }

  void start(Duration delay, Env::Callback callback);
  void start_periodic(Duration period, Env::Callback callback);
  void cancel();
  bool active() const { return id_ != kNoTimer; }

 private:
  Env* env_;
  TimerId id_ = kNoTimer;
};

}  // namespace mesh::core
