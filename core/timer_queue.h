#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/time.h"

namespace mesh::core {

using TimerId = uint64_t;
inline constexpr TimerId kNoTimer = 0;

// Deadline-ordered callbacks. Timers due at the same instant fire in the
// order they were scheduled, which is what makes a simulated run a pure
// function of its seed. Both the simulator and the asio runtime drive one:
// the simulator jumps virtual time to next_deadline(), the runtime sleeps
// until it.
class TimerQueue {
 public:
  using Callback = std::function<void()>;

  TimerId schedule(TimePoint deadline, Callback callback);
  // Returns false if the timer already fired or was cancelled.
  bool cancel(TimerId id);

  std::optional<TimePoint> next_deadline() const;
  // Pops the earliest timer if it is due at or before `now` and runs it.
  // Returns false when nothing is due. Callbacks may schedule and cancel.
  bool run_one(TimePoint now);
  // Runs every timer due at or before `now`, including ones scheduled by the
  // callbacks themselves for such instants. Returns how many ran.
  size_t run_due(TimePoint now);

  size_t size() const { return by_deadline_.size(); }
  bool empty() const { return by_deadline_.empty(); }

 private:
  struct Key {
    TimePoint deadline;
    TimerId id;
    bool operator<(const Key& o) const { return deadline != o.deadline ? deadline < o.deadline : id < o.id; }
  };
  std::map<Key, Callback> by_deadline_;
  std::unordered_map<TimerId, TimePoint> deadline_of_;
  TimerId next_id_ = 1;
};

}  // namespace mesh::core
