#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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
  // Replaces any queued record about the same member and resets its count.
  void enqueue(const MemberRecord& record);
  // Records to piggy-back on one message: at most `max_count`, at most
  // `byte_budget` wire bytes. Counts each as sent once and drops those sent
  // `limit` times.
  std::vector<MemberRecord> take(size_t byte_budget, size_t max_count, uint32_t limit);
  // The queued record about `id`, if any (sent first to the member itself).
  const MemberRecord* find(core::NodeId id) const;
  size_t size() const { return items_.size(); }
  void clear() { items_.clear(); }

  // ceil(mult * log10(n + 1)), at least 1.
  static uint32_t retransmit_limit(uint32_t mult, size_t n);

 private:
  struct Item {
    MemberRecord record;
    size_t bytes = 0;
    uint32_t transmits = 0;
    uint64_t order = 0;  // enqueue order: larger is newer
  };
  std::map<core::NodeId, Item> items_;
  uint64_t next_order_ = 0;
};

}  // namespace mesh::membership
