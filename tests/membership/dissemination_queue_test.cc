#include <gtest/gtest.h>

#include "membership/dissemination_queue.h"
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

}  // namespace
}  // namespace mesh::membership
