// Member digests: equal tables give equal digests whatever order they were
// built in, a changed member changes exactly its own bucket, and the bucket
// count stays within its bounds.
#include "membership/member_digest.h"

#include <gtest/gtest.h>

#include "tests/membership/numbered_members.h"

namespace mesh::membership {
namespace {

using test::numbered_alive;
using test::numbered_id;

// A table of members 1..n (self is member 1), added in the given order.
MemberTable table_of(const std::vector<uint32_t>& order) {
  MemberTable table(numbered_alive(1, 0).member);
  for (uint32_t i : order) {
    if (i != 1) table.apply(numbered_alive(i, 0), core::TimePoint{});
  }
  return table;
}

TEST(MemberDigest, EqualTablesGiveEqualDigests) {
  const MemberTable forward = table_of({2, 3, 4, 5, 6, 7, 8, 9});
  const MemberTable backward = table_of({9, 8, 7, 6, 5, 4, 3, 2});
  for (size_t buckets : {1u, 3u, 8u}) {
    EXPECT_EQ(MemberDigest(forward, buckets), MemberDigest(backward, buckets)) << "buckets=" << buckets;
    for (uint32_t i = 1; i <= 9; ++i) {
      EXPECT_FALSE(MemberDigest(forward, buckets).differs_for(numbered_id(i), MemberDigest(backward, buckets)));
    }
  }
}

TEST(MemberDigest, ChangedMemberChangesOnlyItsBucket) {
  constexpr size_t kBuckets = 4;
  const MemberTable base = table_of({2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  MemberTable changed = base;
  ASSERT_TRUE(changed.apply(numbered_alive(7, 1), core::TimePoint{}).changed);
  const MemberDigest a(base, kBuckets);
  const MemberDigest b(changed, kBuckets);
  EXPECT_NE(a, b);
  for (uint32_t i = 1; i <= 12; ++i) {
    const bool same_bucket =
        MemberDigest::bucket_of(numbered_id(i), kBuckets) == MemberDigest::bucket_of(numbered_id(7), kBuckets);
    EXPECT_EQ(a.differs_for(numbered_id(i), b), same_bucket) << "member " << i;
  }
  // A state change at the same incarnation counts too.
  MemberTable suspected = base;
  MemberRecord suspect = numbered_alive(7, 0);
  suspect.member.state = MemberState::suspect;
  suspect.has_info = false;
  suspect.accuser = numbered_id(2);
  ASSERT_TRUE(suspected.apply(suspect, core::TimePoint{}).changed);
  EXPECT_TRUE(a.differs_for(numbered_id(7), MemberDigest(suspected, kBuckets)));
  // So does another accuser of the suspicion (a confirmation to pass on).
  MemberTable confirmed = suspected;
  suspect.accuser = numbered_id(3);
  ASSERT_TRUE(confirmed.apply(suspect, core::TimePoint{}).new_accuser);
  const MemberDigest once(suspected, kBuckets);
  const MemberDigest twice(confirmed, kBuckets);
  EXPECT_TRUE(once.differs_for(numbered_id(7), twice));
  EXPECT_FALSE(once.differs_for(numbered_id(2), twice) &&
               MemberDigest::bucket_of(numbered_id(2), kBuckets) != MemberDigest::bucket_of(numbered_id(7), kBuckets));
  // Digests of another bucket count are never taken for equal.
  EXPECT_TRUE(a.differs_for(numbered_id(2), MemberDigest(base, kBuckets + 1)));
}

TEST(MemberDigest, BucketCountIsBounded) {
  EXPECT_EQ(MemberDigest::bucket_count(0, 4, 256), 1u);
  EXPECT_EQ(MemberDigest::bucket_count(1, 4, 256), 1u);
  EXPECT_EQ(MemberDigest::bucket_count(9, 4, 256), 3u);
  EXPECT_EQ(MemberDigest::bucket_count(400, 4, 256), 100u);
  EXPECT_EQ(MemberDigest::bucket_count(5000, 4, 256), 256u);
  EXPECT_EQ(MemberDigest::bucket_count(10, 0, 256), 10u);
}

}  // namespace
}  // namespace mesh::membership
