#include "membership/dissemination_queue.h"

#include <algorithm>
#include <cmath>

#include "membership/membership_codec.h"

namespace mesh::membership {

void DisseminationQueue::enqueue(const MemberRecord& record) {
  auto [it, added] = items_.try_emplace(record.member.id);
  Item& item = it->second;
  if (!added) ranked_.erase(rank_of(item));
  item.record = record;
  item.bytes = wire_size(record);
  item.transmits = 0;
  item.order = next_order_++;
  ranked_.insert(rank_of(item));
}

std::vector<MemberRecord> DisseminationQueue::take(size_t byte_budget, size_t max_count, uint32_t limit) {
  std::vector<MemberRecord> out;
  std::vector<Item*> sent;
  size_t used = 0;
  for (const Rank& rank : ranked_) {
    if (out.size() >= max_count) break;
    if (used + rank.item->bytes > byte_budget) continue;
    used += rank.item->bytes;
    out.push_back(rank.item->record);
    sent.push_back(rank.item);
  }
  // Ranked again after the walk, which their new ranks would disturb.
  for (Item* item : sent) {
    ranked_.erase(rank_of(*item));
    if (++item->transmits >= limit) {
      items_.erase(item->record.member.id);
    } else {
      ranked_.insert(rank_of(*item));
    }
  }
  return out;
}

const MemberRecord* DisseminationQueue::find(core::NodeId id) const {
  auto it = items_.find(id);
  return it == items_.end() ? nullptr : &it->second.record;
}

uint32_t DisseminationQueue::retransmit_limit(uint32_t mult, size_t n) {
  const double scale = std::ceil(std::log10(static_cast<double>(n) + 1.0));
  return std::max<uint32_t>(1, static_cast<uint32_t>(mult * scale));
}

}  // namespace mesh::membership
