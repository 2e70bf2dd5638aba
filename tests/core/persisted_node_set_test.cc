#include "core/persisted_node_set.h"

#include <algorithm>
#include <optional>
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

std::string joined(const std::set<NodeId>& ids) {
  std::string text;
  for (NodeId id : ids) {
    if (!text.empty()) text += ',';
    text += id.to_string();
  }
  return text;
}

// MemoryStorage that keeps every change in order (a prefix of them is what a
// crash leaves on a storage that makes changes durable in order, as the
// agent's does) and counts the bytes put.
class RecordingStorage final : public Storage {
 public:
  struct Change {
    std::string key;
    std::optional<std::string> value;  // nullopt: remove
    bool subtree = false;              // remove every key under `key`
  };

  StoredValue read(std::string_view key) const override { return inner_.read(key); }
  bool put(std::string_view key, std::string_view value) override {
    changes_.push_back({std::string(key), std::string(value), false});
    bytes_put_ += value.size();
    return inner_.put(key, value);
  }
  bool remove(std::string_view key) override {
    changes_.push_back({std::string(key), std::nullopt, false});
    return inner_.remove(key);
  }
  std::vector<std::string> keys(std::string_view prefix) const override { return inner_.keys(prefix); }
  // One change, as the agent's storage makes it.
  bool remove_prefix(std::string_view prefix) override {
    changes_.push_back({std::string(prefix), std::nullopt, true});
    return inner_.remove_prefix(prefix);
  }

  const std::vector<Change>& changes() const { return changes_; }
  uint64_t bytes_put() const { return bytes_put_; }
  MemoryStorage& inner() { return inner_; }

  // What storage holds after the first `count` changes only.
  static MemoryStorage replay(const std::vector<Change>& changes, size_t count) {
    MemoryStorage storage;
    for (size_t i = 0; i < count; ++i) {
      const Change& c = changes[i];
      if (c.subtree) {
        storage.remove_prefix(c.key);
      } else if (c.value) {
        storage.put(c.key, *c.value);
      } else {
        storage.remove(c.key);
      }
    }
    return storage;
  }

 private:
  MemoryStorage inner_;
  std::vector<Change> changes_;
  uint64_t bytes_put_ = 0;
};

struct Fixture {
  Metrics metrics;
  PersistedNodeSet open(Storage& storage, size_t max_nodes) {
    return PersistedNodeSet(storage, kKey, max_nodes, "test", metrics.counter("write_failures"),
                            metrics.counter("unreadable"));
  }
  std::vector<NodeId> reopened(Storage& storage, size_t max_nodes) { return open(storage, max_nodes).nodes(); }
};

NodeId random_id(Rng& rng) {
  // Octets of one, two and three digits, so neighbours in the order differ in length.
  const uint8_t octets[] = {0, 7, 10, 99, 100, 255};
  return Ipv4Address::from_octets(octets[rng.below(6)], octets[rng.below(6)], octets[rng.below(6)],
                                  static_cast<uint8_t>(1 + rng.below(3)));
}

// After every remember() and forget(), a later life opened on what storage
// holds reads the set back, and the journal stays within its bound.
TEST(PersistedNodeSet, ALaterLifeReadsEveryChange) {
  constexpr size_t kMaxNodes = 200;  // reached: the full set refuses newcomers
  Fixture f;
  MemoryStorage storage;
  PersistedNodeSet set = f.open(storage, kMaxNodes);
  std::set<NodeId> expected;
  Rng rng(7);
  for (int step = 0; step < 2000; ++step) {
    const NodeId id = random_id(rng);
    if (rng.below(3) == 0) {
      set.forget(id);
      expected.erase(id);
    } else {
      set.remember(id);
      if (expected.size() < kMaxNodes) expected.insert(id);
    }
    const std::vector<NodeId> want(expected.begin(), expected.end());
    ASSERT_EQ(set.nodes(), want) << "step " << step;
    ASSERT_LE(storage.keys(set.journal_prefix()).size(), std::max<size_t>(16, expected.size() / 4)) << "step " << step;
    MemoryStorage copy = storage;  // a later life folds the journal: not under this one's feet
    ASSERT_EQ(f.reopened(copy, kMaxNodes), want) << "step " << step;
  }
  // A later life starts from the set folded into one value, and goes on.
  PersistedNodeSet again = f.open(storage, kMaxNodes);
  EXPECT_EQ(storage.get(kKey).value_or(""), joined(expected));
  EXPECT_TRUE(storage.keys(again.journal_prefix()).empty());
  const NodeId last = *expected.rbegin();
  again.forget(last);
  expected.erase(last);
  EXPECT_EQ(f.reopened(storage, kMaxNodes), std::vector<NodeId>(expected.begin(), expected.end()));
  EXPECT_EQ(f.metrics.total("unreadable"), 0u);
}

// A crash after any change of storage leaves, for a later life, the set as
// it was before the call that made the change or as that call left it.
TEST(PersistedNodeSet, ACrashAtAnyPointLosesNothingAndRevivesNothing) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    Fixture f;
    RecordingStorage storage;
    PersistedNodeSet set = f.open(storage, 1000);
    Rng rng(seed);
    std::vector<std::set<NodeId>> states{{}};  // after each call
    std::vector<size_t> changes_after{0};      // changes made by the end of each call
    std::set<NodeId> expected;
    for (int step = 0; step < 150; ++step) {
      const NodeId id = random_id(rng);
      if (rng.below(4) == 0) {
        set.forget(id);
        expected.erase(id);
      } else {
        set.remember(id);
        expected.insert(id);
      }
      states.push_back(expected);
      changes_after.push_back(storage.changes().size());
    }
    size_t call = 1;
    for (size_t count = 0; count <= storage.changes().size(); ++count) {
      while (call < changes_after.size() && changes_after[call] < count) ++call;
      MemoryStorage crashed = RecordingStorage::replay(storage.changes(), count);
      const std::vector<NodeId> read = f.reopened(crashed, 1000);
      const std::set<NodeId> got(read.begin(), read.end());
      // `count` changes in: call `call` made the last of them (or none yet).
      ASSERT_TRUE(got == states[call] || got == states[call - 1]) << "after change " << count;
    }
  }
}

// A new member costs a small put, not a rewrite of the whole set: the bytes
// put grow linearly with the members, not quadratically.
TEST(PersistedNodeSet, BytesPutGrowLinearlyWithTheMembers) {
  constexpr uint32_t kMembers = 2000;
  Fixture f;
  RecordingStorage storage;
  PersistedNodeSet set = f.open(storage, kMembers);
  for (uint32_t i = 0; i < kMembers; ++i) set.remember(Ipv4Address(0x0a000000 + i + 1));
  EXPECT_EQ(set.nodes().size(), kMembers);
  // About 10 bytes per id: once in the journal, and a few times in the
  // snapshots folded as the journal reached a quarter of the set.
  EXPECT_LT(storage.bytes_put(), 100u * kMembers);
  EXPECT_EQ(f.reopened(storage.inner(), kMembers).size(), kMembers);
}

TEST(PersistedNodeSet, ForgettingTheOnlyIdLeavesNothing) {
  Fixture f;
  MemoryStorage storage;
  PersistedNodeSet set = f.open(storage, 4);
  set.remember(Ipv4Address::from_octets(10, 0, 0, 1));
  MemoryStorage copy = storage;  // a later life folds the journal: not under this one's feet
  EXPECT_EQ(f.reopened(copy, 4), std::vector<NodeId>{Ipv4Address::from_octets(10, 0, 0, 1)});
  set.forget(Ipv4Address::from_octets(10, 0, 0, 1));
  EXPECT_TRUE(set.nodes().empty());
  EXPECT_TRUE(f.reopened(storage, 4).empty());
}

// A stored value out of order, with duplicates and bad entries, is read as
// the set it names; a journal entry whose value does not name its key (a
// damaged one) is skipped. The next life stores the set in order.
TEST(PersistedNodeSet, ReadsAnUnorderedValueAndSkipsBadEntries) {
  Fixture f;
  MemoryStorage storage;
  ASSERT_TRUE(storage.put(kKey, "10.0.0.9,bad,10.0.0.10,10.0.0.9,,10.0.0.1"));
  ASSERT_TRUE(storage.put(std::string(kKey) + ".added/10.0.0.3", "10.0.0.3"));
  ASSERT_TRUE(storage.put(std::string(kKey) + ".added/10.0.0.4", "10.0.0.5"));
  PersistedNodeSet set = f.open(storage, 8);
  EXPECT_EQ(set.nodes(),
            (std::vector<NodeId>{Ipv4Address::from_octets(10, 0, 0, 1), Ipv4Address::from_octets(10, 0, 0, 3),
                                 Ipv4Address::from_octets(10, 0, 0, 9), Ipv4Address::from_octets(10, 0, 0, 10)}));
  EXPECT_EQ(f.metrics.total("unreadable"), 3u);  // "bad", "" and the mismatched journal entry
  EXPECT_EQ(storage.get(kKey).value_or("absent"), "10.0.0.1,10.0.0.3,10.0.0.9,10.0.0.10");
  EXPECT_TRUE(storage.keys(set.journal_prefix()).empty());
}

}  // namespace
}  // namespace mesh::core
