#include "core/timer_queue.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace mesh::core {

TimerId TimerQueue::schedule(TimePoint deadline, Callback callback) {
  size_t slot = 0;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (slots_.size() > kSlotMask) throw std::length_error("TimerQueue: too many pending timers");
    slot = slots_.size();
    slots_.emplace_back();
  }
  const TimerId id = next_sequence_++ << kSlotBits | slot;
  slots_[slot] = Slot{id, std::move(callback)};
  heap_.push_back(Entry{deadline, id});
  std::push_heap(heap_.begin(), heap_.end());
  ++live_;
  return id;
}

void TimerQueue::release(size_t slot) {
  slots_[slot].id = kNoTimer;
  slots_[slot].callback = nullptr;
  free_slots_.push_back(slot);
  --live_;
}

bool TimerQueue::cancel(TimerId id) {
  const size_t slot = id & kSlotMask;
  if (id == kNoTimer || slot >= slots_.size() || slots_[slot].id != id) return false;
  release(slot);
  // Cancelled entries wait in the heap for their deadline; once they
  // outnumber the live ones, the heap is rebuilt without them.
  if (heap_.size() > 2 * live_ + 64) {
    std::erase_if(heap_, [this](const Entry& entry) { return !is_live(entry); });
    std::make_heap(heap_.begin(), heap_.end());
  }
  return true;
}

void TimerQueue::drop_cancelled_top() const {
  while (!heap_.empty() && !is_live(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end());
    heap_.pop_back();
  }
}

std::optional<TimePoint> TimerQueue::next_deadline() const {
  drop_cancelled_top();
  if (heap_.empty()) return std::nullopt;
  return heap_.front().deadline;
}

bool TimerQueue::run_one(TimePoint now) {
  drop_cancelled_top();
  if (heap_.empty() || heap_.front().deadline > now) return false;
  const size_t slot = heap_.front().id & kSlotMask;
  std::pop_heap(heap_.begin(), heap_.end());
  heap_.pop_back();
  Callback callback = std::move(slots_[slot].callback);
  release(slot);
  callback();
  return true;
}

size_t TimerQueue::run_due(TimePoint now) {
  size_t ran = 0;
  while (run_one(now)) ++ran;
  return ran;
}

}  // namespace mesh::core
