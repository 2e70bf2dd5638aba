#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "core/node_id.h"
#include "membership/member_record.h"

namespace mesh::membership {

// Updates waiting to be piggy-backed (SWIM's infection-style dissemination).
// One entry per member (a newer record replaces an older one); each is sent
// `limit` times, least-sent first and, among equals, newest first (memberlist's
// transmit-limited queue), so fresh news goes out before old news and nothing
// starves behind a flood of updates.
class DisseminationQueue {
 public:
  DisseminationQueue() = default;
  // The order index points into the items: a copy would point into the original.
  DisseminationQueue(const DisseminationQueue&) = delete;
  DisseminationQueue& operator=(const DisseminationQueue&) = delete;
  DisseminationQueue(DisseminationQueue&&) = default;
  DisseminationQueue& operator=(DisseminationQueue&&) = default;

  // Replaces any queued record about the same member and resets its count.
  void enqueue(const MemberRecord& record);
  // Records to piggy-back on one message: at most `max_count`, at most
  // `byte_budget` wire bytes. Counts each as sent once and drops those sent
  // `limit` times.
  std::vector<MemberRecord> take(size_t byte_budget, size_t max_count, uint32_t limit);
  // The queued record about `id`, if any (sent first to the member itself).
  const MemberRecord* find(core::NodeId id) const;
  size_t size() const { return items_.size(); }
  void clear() {
    items_.clear();
    ranked_.clear();
  }

  // ceil(mult * log10(n + 1)), at least 1.
  static uint32_t retransmit_limit(uint32_t mult, size_t n);

 private:
  struct Item {
    MemberRecord record;
    size_t bytes = 0;
    uint32_t transmits = 0;
    uint64_t order = 0;  // enqueue order: larger is newer
  };
  // An item's place in take()'s order: least sent first, then newest.
  struct Rank {
    uint32_t transmits;
    uint64_t newest_first;  // ~order
    Item* item;
    bool operator<(const Rank& other) const {
      return transmits != other.transmits ? transmits < other.transmits : newest_first < other.newest_first;
    }
  };
  static Rank rank_of(Item& item) { return Rank{item.transmits, ~item.order, &item}; }

  std::map<core::NodeId, Item> items_;
  // Every item in take()'s order, kept at every change: during a large
  // mesh's convergence the queue holds hundreds of members, and sorting it
  // for every message that piggy-backs a few grew with the mesh.
  std::set<Rank> ranked_;
  uint64_t next_order_ = 0;
};

}  // namespace mesh::membership
