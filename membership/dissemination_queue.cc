#include "membership/dissemination_queue.h"

#include <algorithm>
#include <cmath>

#include "membership/membership_codec.h"

namespace mesh::membership {

void DisseminationQueue::enqueue(const MemberRecord& record) {
  Item& item = items_[record.member.id];
  item.record = record;
  item.bytes = wire_size(record);
  item.transmits = 0;
  item.order = next_order_++;
}

std::vector<MemberRecord> DisseminationQueue::take(size_t byte_budget, size_t max_count, uint32_t limit) {
  std::vector<Item*> order;
  order.reserve(items_.size());
  for (auto& [id, item] : items_) order.push_back(&item);
  std::sort(order.begin(), order.end(), [](const Item* a, const Item* b) {
    return a->transmits != b->transmits ? a->transmits < b->transmits : a->order > b->order;
  });
  std::vector<MemberRecord> out;
  std::vector<core::NodeId> spent;
  size_t used = 0;
  for (Item* item : order) {
    if (out.size() >= max_count) break;
    if (used + item->bytes > byte_budget) continue;
    used += item->bytes;
    out.push_back(item->record);
    if (++item->transmits >= limit) spent.push_back(item->record.member.id);
  }
  for (core::NodeId id : spent) items_.erase(id);
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
