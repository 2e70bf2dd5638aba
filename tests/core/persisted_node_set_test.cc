#include "core/persisted_node_set.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_storage.h"
#include "core/metrics.h"
#include "core/rng.h"

namespace mesh::core {
namespace {

constexpr const char* kKey = "test/nodes";

// What the stored value must be: the ids in increasing order, comma-separated.
std::string joined(const std::set<NodeId>& ids) {
  std::string text;
  for (NodeId id : ids) {
    if (!text.empty()) text += ',';
    text += id.to_string();
  }
  return text;
}

struct Fixture {
  MemoryStorage storage;
  Metrics metrics;
  PersistedNodeSet open(size_t max_nodes) {
    return PersistedNodeSet(storage, kKey, max_nodes, "test", metrics.counter("write_failures"),
                            metrics.counter("unreadable"));
  }
};

// The stored text is edited in place rather than rewritten: after every
// remember() and forget(), at the front, in the middle and at the end, and
// with ids of every printed length, it must equal the whole set written out.
TEST(PersistedNodeSet, StoredValueFollowsEveryChange) {
  constexpr size_t kMaxNodes = 200;  // reached: the full set refuses newcomers
  Fixture f;
  PersistedNodeSet set = f.open(kMaxNodes);
  std::set<NodeId> expected;
  Rng rng(7);
  // Octets of one, two and three digits, so neighbours in the order differ in length.
  const uint8_t octets[] = {0, 7, 10, 99, 100, 255};
  auto random_id = [&] {
    return Ipv4Address::from_octets(octets[rng.below(6)], octets[rng.below(6)], octets[rng.below(6)],
                                    static_cast<uint8_t>(1 + rng.below(3)));
  };
  for (int step = 0; step < 2000; ++step) {
    const NodeId id = random_id();
    if (rng.below(3) == 0) {
      set.forget(id);
      expected.erase(id);
    } else {
      set.remember(id);
      if (expected.size() < kMaxNodes) expected.insert(id);
    }
    ASSERT_EQ(set.nodes(), std::vector<NodeId>(expected.begin(), expected.end())) << "step " << step;
    ASSERT_EQ(f.storage.get(kKey).value_or(""), joined(expected)) << "step " << step;
  }
  // A later life reads the same set back and keeps editing the same text.
  PersistedNodeSet again = f.open(kMaxNodes);
  EXPECT_EQ(again.nodes(), std::vector<NodeId>(expected.begin(), expected.end()));
  const NodeId last = *expected.rbegin();
  again.forget(last);
  expected.erase(last);
  EXPECT_EQ(f.storage.get(kKey).value_or(""), joined(expected));
}

TEST(PersistedNodeSet, ForgettingTheOnlyIdStoresAnEmptyValue) {
  Fixture f;
  PersistedNodeSet set = f.open(4);
  set.remember(Ipv4Address::from_octets(10, 0, 0, 1));
  EXPECT_EQ(f.storage.get(kKey).value_or("absent"), "10.0.0.1");
  set.forget(Ipv4Address::from_octets(10, 0, 0, 1));
  EXPECT_EQ(f.storage.get(kKey).value_or("absent"), "");
  EXPECT_TRUE(set.nodes().empty());
}

// A stored value out of order, with duplicates and bad entries, is read as
// the set it names, and the next change stores that set in order.
TEST(PersistedNodeSet, RewritesAnUnorderedValueInOrder) {
  Fixture f;
  ASSERT_TRUE(f.storage.put(kKey, "10.0.0.9,bad,10.0.0.10,10.0.0.9,,10.0.0.1"));
  PersistedNodeSet set = f.open(8);
  EXPECT_EQ(set.nodes(),
            (std::vector<NodeId>{Ipv4Address::from_octets(10, 0, 0, 1), Ipv4Address::from_octets(10, 0, 0, 9),
                                 Ipv4Address::from_octets(10, 0, 0, 10)}));
  set.remember(Ipv4Address::from_octets(10, 0, 0, 2));
  EXPECT_EQ(f.storage.get(kKey).value_or("absent"), "10.0.0.1,10.0.0.2,10.0.0.9,10.0.0.10");
}

}  // namespace
}  // namespace mesh::core
