#include "membership/dissemination_queue.h"

#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "membership/membership_codec.h"

namespace mesh::membership {
namespace {

MemberRecord rec(uint32_t i, uint64_t incarnation = 0) {
  MemberRecord r;
  r.member.id = core::NodeId(0x0a000000u + i);
  r.member.incarnation = incarnation;
  r.member.name = "n" + std::to_string(i);
  r.has_info = true;
  return r;
}

TEST(DisseminationQueue, RetransmitLimitGrowsWithLogN) {
  EXPECT_EQ(DisseminationQueue::retransmit_limit(4, 1), 4u);
  EXPECT_EQ(DisseminationQueue::retransmit_limit(4, 9), 4u);
  EXPECT_EQ(DisseminationQueue::retransmit_limit(4, 10), 8u);
  EXPECT_EQ(DisseminationQueue::retransmit_limit(4, 100), 12u);
  EXPECT_EQ(DisseminationQueue::retransmit_limit(0, 100), 1u);
}

TEST(DisseminationQueue, EachUpdateSentLimitTimesThenDropped) {
  DisseminationQueue q;
  q.enqueue(rec(1));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(q.take(1000, 10, 3).size(), 1u);
  EXPECT_TRUE(q.take(1000, 10, 3).empty());
  EXPECT_EQ(q.size(), 0u);
}

TEST(DisseminationQueue, NewerRecordReplacesOlderAndLeastSentGoFirst) {
  DisseminationQueue q;
  q.enqueue(rec(1));
  q.enqueue(rec(2));
  auto first = q.take(1000, 1, 10);  // newest first among equals
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].member.id, rec(2).member.id);
  auto second = q.take(1000, 1, 10);  // then the one sent fewer times
  EXPECT_EQ(second[0].member.id, rec(1).member.id);
  q.enqueue(rec(1, 7));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.find(rec(1).member.id)->member.incarnation, 7u);
}

TEST(DisseminationQueue, RespectsByteBudgetAndCount) {
  DisseminationQueue q;
  for (uint32_t i = 1; i <= 50; ++i) q.enqueue(rec(i));
  const size_t one = wire_size(rec(10));
  auto taken = q.take(one * 5 + one / 2, 100, 10);
  EXPECT_EQ(taken.size(), 5u);
  EXPECT_EQ(q.take(100000, 7, 10).size(), 7u);
}

// The queue as it was before it kept its order: every take() sorts every
// item.
class SortingQueue {
 public:
  void enqueue(const MemberRecord& record) {
    Item& item = items_[record.member.id];
    item.record = record;
    item.bytes = wire_size(record);
    item.transmits = 0;
    item.order = next_order_++;
  }
  std::vector<MemberRecord> take(size_t byte_budget, size_t max_count, uint32_t limit) {
    std::vector<Item*> order;
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
  size_t size() const { return items_.size(); }

 private:
  struct Item {
    MemberRecord record;
    size_t bytes = 0;
    uint32_t transmits = 0;
    uint64_t order = 0;
  };
  std::map<core::NodeId, Item> items_;
  uint64_t next_order_ = 0;
};

TEST(DisseminationQueue, TakesWhatSortingEveryItemTookOnRandomSequences) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto draw = [&rng](uint32_t bound) { return static_cast<uint32_t>(rng() % bound); };
    DisseminationQueue queue;
    SortingQueue reference;
    for (int step = 0; step < 3000; ++step) {
      if (draw(3) != 0) {
        // Names of different lengths give records of different sizes, so
        // the byte budget skips some.
        MemberRecord record = rec(1 + draw(40), draw(5));
        record.member.name = std::string(1 + draw(30), 'x');
        queue.enqueue(record);
        reference.enqueue(record);
      } else {
        const size_t budget = 20 + draw(300);
        const size_t count = 1 + draw(8);
        const uint32_t limit = 1 + draw(6);
        ASSERT_EQ(queue.take(budget, count, limit), reference.take(budget, count, limit))
            << "seed " << seed << " step " << step;
      }
      ASSERT_EQ(queue.size(), reference.size());
    }
  }
}

}  // namespace
}  // namespace mesh::membership
