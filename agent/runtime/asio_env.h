#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "core/env.h"
#include "core/rng.h"
#include "core/time.h"
#include "core/timer_queue.h"

namespace mesh::agent {

// The agent's Env: the monotonic clock since construction, timers on the
// io_context's thread, and a generator seeded from the operating system.
// All timers live in one core::TimerQueue; a single asio timer sleeps until
// its earliest deadline, so thousands of protocol timers cost one kernel
// timer and fire in the same order as in the simulator.
class AsioEnv final : public core::Env {
 public:
  // Seeds the generator from std::random_device.
  explicit AsioEnv(asio::io_context& io);
  // A fixed seed, for tests.
  AsioEnv(asio::io_context& io, uint64_t seed);
  AsioEnv(const AsioEnv&) = delete;
  AsioEnv& operator=(const AsioEnv&) = delete;
  ~AsioEnv() override;

  core::TimePoint now() const override;
  core::Rng& rng() override { return rng_; }

  // Timers scheduled and neither fired nor cancelled.
  size_t pending_timers() const { return queue_.size(); }

 protected:
  core::TimerId schedule_one_shot(core::Duration delay, Callback callback) override;
  void cancel_one_shot(core::TimerId id) override;

 private:
  // Points the asio timer at the queue's earliest deadline, or idles it when
  // the queue is empty so io_context::run() can return.
  void rearm();
  void on_wakeup();

  std::chrono::steady_clock::time_point epoch_;
  core::TimerQueue queue_;
  asio::steady_timer timer_;
  std::optional<core::TimePoint> armed_for_;
  bool running_ = false;
  core::Rng rng_;
  // Handlers already queued on the io_context may run after this object is
  // gone; they hold a weak reference to this and do nothing once it expires.
  std::shared_ptr<AsioEnv*> alive_;
};

}  // namespace mesh::agent
