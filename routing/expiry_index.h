#pragma once

#include <optional>
#include <set>
#include <utility>

#include "core/time.h"

namespace mesh::routing::olsr {

// The keys of a table ordered by their expiry time, beside the table itself,
// so the owner finds what has expired, and when the next tuple expires,
// without walking the whole table: OLSR's topology set grows with the mesh
// (every TC originator's advertised links), and it is checked after every
// packet received.
//
// The index holds exactly one entry per table tuple; the owner keeps them in
// step by calling add(), move() and remove() wherever the table gains a
// tuple, changes a tuple's time or loses one. Ties in time are broken by key,
// so the order of expiry is deterministic.
template <typename Key>
class ExpiryIndex {
 public:
  void add(const Key& key, core::TimePoint time) { by_time_.emplace(time, key); }
  void remove(const Key& key, core::TimePoint time) { by_time_.erase({time, key}); }
  void move(const Key& key, core::TimePoint from, core::TimePoint to) {
    if (from == to) return;
    remove(key, from);
    add(key, to);
  }

  // The earliest time of any tuple, if any.
  std::optional<core::TimePoint> earliest() const {
    if (by_time_.empty()) return std::nullopt;
    return by_time_.begin()->first;
  }
  // The key of a tuple whose time is at or before `now`, taken out of the
  // index; nullopt when none has expired.
  std::optional<Key> pop_expired(core::TimePoint now) {
    if (by_time_.empty() || by_time_.begin()->first > now) return std::nullopt;
    Key key = by_time_.begin()->second;
    by_time_.erase(by_time_.begin());
    return key;
  }
  size_t size() const { return by_time_.size(); }

 private:
  std::set<std::pair<core::TimePoint, Key>> by_time_;
};

}  // namespace mesh::routing::olsr
