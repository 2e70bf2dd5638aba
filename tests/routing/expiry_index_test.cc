// ExpiryIndex: expired keys come out in time order (ties by key), moved and
// removed tuples are found at their new time or not at all.
#include <gtest/gtest.h>

#include "routing/expiry_index.h"

namespace mesh::routing::olsr {
namespace {

core::TimePoint at(int seconds) { return core::TimePoint(std::chrono::seconds(seconds)); }

TEST(ExpiryIndex, PopsExpiredKeysInTimeOrder) {
  ExpiryIndex<int> index;
  EXPECT_FALSE(index.earliest().has_value());
  index.add(7, at(3));
  index.add(5, at(1));
  index.add(9, at(1));
  EXPECT_EQ(index.earliest(), at(1));
  EXPECT_FALSE(index.pop_expired(at(0)).has_value());
  EXPECT_EQ(index.pop_expired(at(2)), 5);
  EXPECT_EQ(index.pop_expired(at(2)), 9);
  EXPECT_FALSE(index.pop_expired(at(2)).has_value());
  EXPECT_EQ(index.earliest(), at(3));
  // At exactly its time a tuple is gone.
  EXPECT_EQ(index.pop_expired(at(3)), 7);
  EXPECT_EQ(index.size(), 0u);
}

TEST(ExpiryIndex, MoveAndRemoveKeepOneEntryPerKey) {
  ExpiryIndex<int> index;
  index.add(1, at(1));
  index.add(2, at(2));
  index.move(1, at(1), at(5));
  index.move(2, at(2), at(2));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.earliest(), at(2));
  index.remove(2, at(2));
  EXPECT_EQ(index.earliest(), at(5));
  EXPECT_FALSE(index.pop_expired(at(4)).has_value());
  EXPECT_EQ(index.pop_expired(at(5)), 1);
  EXPECT_FALSE(index.earliest().has_value());
}

}  // namespace
}  // namespace mesh::routing::olsr
