#include "agent/runtime/asio_env.h"

#include <random>
#include <utility>

#include <asio/error.hpp>

namespace mesh::agent {
namespace {

uint64_t seed_from_os() {
  std::random_device device;
  uint64_t seed = 0;
  // random_device yields 32 bits per call on libstdc++.
  for (int i = 0; i < 2; ++i) seed = (seed << 32) | static_cast<uint32_t>(device());
  return seed;
}

}  // namespace

AsioEnv::AsioEnv(asio::io_context& io) : AsioEnv(io, seed_from_os()) {}

AsioEnv::AsioEnv(asio::io_context& io, uint64_t seed)
    : epoch_(std::chrono::steady_clock::now()),
      timer_(io),
      rng_(seed),
      alive_(std::make_shared<AsioEnv*>(this)) {}

// Destroying timer_ aborts its wait; alive_ going away stops a wake-up that
// had already been queued.
AsioEnv::~AsioEnv() = default;

core::TimePoint AsioEnv::now() const {
  return core::TimePoint(std::chrono::duration_cast<core::Duration>(std::chrono::steady_clock::now() - epoch_));
}

core::TimerId AsioEnv::schedule_one_shot(core::Duration delay, Callback callback) {
  const core::TimePoint current = now();
  const core::TimePoint deadline = delay > core::Duration::zero() ? current + delay : current;
  const core::TimerId id = queue_.schedule(deadline, std::move(callback));
  rearm();
  return id;
}

void AsioEnv::cancel_one_shot(core::TimerId id) {
  if (queue_.cancel(id)) rearm();
}

void AsioEnv::rearm() {
  // Callbacks run by on_wakeup() schedule and cancel freely; the timer is
  // pointed once afterwards.
  if (running_) return;
  const std::optional<core::TimePoint> next = queue_.next_deadline();
  if (next == armed_for_) return;
  armed_for_ = next;
  if (!next) {
    timer_.cancel();
    return;
  }
  // expires_at() aborts the previous wait; its handler sees operation_aborted.
  timer_.expires_at(epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(next->time_since_epoch()));
  std::weak_ptr<AsioEnv*> weak = alive_;
  timer_.async_wait([weak](const asio::error_code& error) {
    if (error == asio::error::operation_aborted) return;
    const std::shared_ptr<AsioEnv*> self = weak.lock();
    if (!self) return;
    (*self)->on_wakeup();
  });
}

void AsioEnv::on_wakeup() {
  armed_for_.reset();
  running_ = true;
  try {
    queue_.run_due(now());
  } catch (...) {
    running_ = false;
    rearm();
    throw;
  }
  running_ = false;
  rearm();
}

}  // namespace mesh::agent
