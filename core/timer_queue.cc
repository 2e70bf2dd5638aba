#include "core/timer_queue.h"

#include <utility>

namespace mesh::core {

TimerId TimerQueue::schedule(TimePoint deadline, Callback callback) {
  const TimerId id = next_id_++;
  by_deadline_.emplace(Key{deadline, id}, std::move(callback));
  deadline_of_.emplace(id, deadline);
  return id;
}

bool TimerQueue::cancel(TimerId id) {
  auto it = deadline_of_.find(id);
  if (it == deadline_of_.end()) return false;
  by_deadline_.erase(Key{it->second, id});
  deadline_of_.erase(it);
  return true;
}

std::optional<TimePoint> TimerQueue::next_deadline() const {
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first.deadline;
}

bool TimerQueue::run_one(TimePoint now) {
  if (by_deadline_.empty()) return false;
  auto first = by_deadline_.begin();
  if (first->first.deadline > now) return false;
  Callback callback = std::move(first->second);
  deadline_of_.erase(first->first.id);
  by_deadline_.erase(first);
  callback();
  return true;
}

size_t TimerQueue::run_due(TimePoint now) {
  size_t ran = 0;
  while (run_one(now)) ++ran;
  return ran;
}

}  // namespace mesh::core
