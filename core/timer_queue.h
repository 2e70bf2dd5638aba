#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/time.h"

namespace mesh::core {

using TimerId = uint64_t;
inline constexpr TimerId kNoTimer = 0;

// Deadline-ordered callbacks. Timers due at the same instant fire in the
// order they were scheduled, which is what makes a simulated run a pure
// function of its seed. Both the simulator and the asio runtime drive one:
// the simulator jumps virtual time to next_deadline(), the runtime sleeps
// until it.
//
// A binary heap of (deadline, id) over one array, the callbacks in slots
// beside it. In a simulated mesh every node's timers and every datagram in
// flight share one queue; as a tree it cost a cache miss per level on every
// schedule and grew deeper with the mesh. A cancelled timer's callback goes
// at once, its heap entry when it comes up (or when cancelled entries
// outnumber the live ones).
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

  size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }

 private:
  // An id is its scheduling sequence number above its slot's index, so ids
  // order timers as they were scheduled and name their slot.
  static constexpr int kSlotBits = 24;
  static constexpr TimerId kSlotMask = (TimerId{1} << kSlotBits) - 1;

  struct Entry {
    TimePoint deadline;
    TimerId id;
    // The heap keeps the greatest on top; the earliest must be.
    bool operator<(const Entry& o) const { return deadline != o.deadline ? deadline > o.deadline : id > o.id; }
  };
  struct Slot {
    TimerId id = kNoTimer;  // kNoTimer while free
    Callback callback;
  };

  bool is_live(const Entry& entry) const { return slots_[entry.id & kSlotMask].id == entry.id; }
  // Pops cancelled entries off the top, so the top is a live timer.
  void drop_cancelled_top() const;
  void release(size_t slot);

  // Mutable: next_deadline() drops cancelled entries it finds on top.
  mutable std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<size_t> free_slots_;
  size_t live_ = 0;
  TimerId next_sequence_ = 1;
};

}  // namespace mesh::core
