#include "core/rng.h"

#include <gtest/gtest.h>

#include <array>

namespace mesh::core {
namespace {

TEST(Rng, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::array<int, 10> hits{};
  for (int i = 0; i < 10000; ++i) {
    const uint64_t x = rng.below(10);
    ASSERT_LT(x, 10u);
    ++hits[x];
  }
  for (int h : hits) EXPECT_GT(h, 800);  // expected 1000 each
}

TEST(Rng, UnitAndBetween) {
  Rng rng(9);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const int64_t v = rng.between(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
  }
  EXPECT_FALSE(rng.chance(0.0));
  EXPECT_TRUE(rng.chance(1.0));
}

}  // namespace
}  // namespace mesh::core
