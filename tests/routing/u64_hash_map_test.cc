// U64HashMap against std::unordered_map: random inserts, finds and erases
// over a small key space (so runs collide, wrap around the table's end and
// are shifted back by erases) must agree on every lookup and on the size.
#include "routing/u64_hash_map.h"

#include <gtest/gtest.h>

#include <unordered_map>

#include "core/rng.h"

namespace mesh::routing {
namespace {

TEST(U64HashMap, MatchesUnorderedMapUnderRandomOperations) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    core::Rng rng(seed);
    // Keys as OLSR's duplicate keys: an address above a sequence number.
    const uint64_t originators = 1 + rng.below(20);
    auto random_key = [&] { return (uint64_t{0x0a000001} + rng.below(originators)) << 16 | rng.below(64); };
    U64HashMap<int> map;
    std::unordered_map<uint64_t, int> reference;
    for (int step = 0; step < 4000; ++step) {
      const uint64_t key = random_key();
      const uint64_t op = rng.below(3);
      if (op == 0) {
        if (reference.count(key) == 0) {
          const int value = static_cast<int>(rng.below(1000));
          reference.emplace(key, value);
          ASSERT_EQ(map.insert(key, value), value);
        }
      } else if (op == 1) {
        ASSERT_EQ(map.erase(key), reference.erase(key) == 1);
      } else {
        const int* found = map.find(key);
        auto expected = reference.find(key);
        ASSERT_EQ(found != nullptr, expected != reference.end());
        if (found != nullptr) {
          ASSERT_EQ(*found, expected->second);
        }
      }
      ASSERT_EQ(map.size(), reference.size());
    }
    for (const auto& [key, value] : reference) {
      const int* found = map.find(key);
      ASSERT_NE(found, nullptr);
      ASSERT_EQ(*found, value);
    }
  }
}

TEST(U64HashMap, ValuesAreWritableInPlace) {
  U64HashMap<int> map;
  map.insert(42, 1);
  *map.find(42) = 7;
  EXPECT_EQ(*map.find(42), 7);
  EXPECT_EQ(map.find(43), nullptr);
  EXPECT_TRUE(map.erase(42));
  EXPECT_FALSE(map.erase(42));
  EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace mesh::routing
