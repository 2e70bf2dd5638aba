// TopologySet against a plain reference of RFC 3626 §9.5 (a map of
// (T_last, T_dest) -> (ANSN, time), walked whole at every step): random TCs
// (new, renewed, replaced by another ANSN, empty, with repeated
// destinations) and expiries must leave the same tuples, report the same
// changes and name the same earliest expiry; the edge changes it records
// must replay to the same edges.
#include "routing/topology_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace mesh::routing::olsr {
namespace {

using core::NodeId;
using core::TimePoint;

NodeId node(uint64_t i) { return NodeId::from_octets(10, 0, 0, static_cast<uint8_t>(i + 1)); }
TimePoint at_ms(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

class ReferenceTopology {
 public:
  std::optional<uint16_t> ansn_of(NodeId originator) const {
    for (const auto& [key, value] : tuples_) {
      if (key.first == originator) return value.first;
    }
    return std::nullopt;
  }
  bool apply_tc(NodeId originator, uint16_t ansn, const std::vector<NodeId>& advertised, TimePoint until) {
    bool changed = false;
    for (auto it = tuples_.begin(); it != tuples_.end();) {
      if (it->first.first == originator && it->second.first != ansn) {
        it = tuples_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    for (NodeId dest : advertised) {
      auto [it, added] = tuples_.insert_or_assign({originator, dest}, std::pair{ansn, until});
      (void)it;
      changed |= added;
    }
    return changed;
  }
  bool expire(TimePoint now) {
    return std::erase_if(tuples_, [&](const auto& entry) { return entry.second.second <= now; }) > 0;
  }
  std::optional<TimePoint> earliest_expiry() const {
    std::optional<TimePoint> earliest;
    for (const auto& [key, value] : tuples_) {
      if (!earliest || value.second < *earliest) earliest = value.second;
    }
    return earliest;
  }
  std::vector<TopologySet::Tuple> tuples() const {
    std::vector<TopologySet::Tuple> out;
    for (const auto& [key, value] : tuples_) out.push_back({key.first, key.second, value.first, value.second});
    return out;
  }

 private:
  std::map<std::pair<NodeId, NodeId>, std::pair<uint16_t, TimePoint>> tuples_;
};

TEST(TopologySet, MatchesReferenceUnderRandomTcsAndExpiry) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(seed);
    core::Rng rng(seed);
    const uint64_t nodes = 2 + rng.below(30);
    std::vector<uint16_t> ansn(nodes, 0);
    TopologySet set;
    ReferenceTopology reference;
    std::set<std::pair<NodeId, NodeId>> replayed;
    int64_t now_ms = 0;
    for (int step = 0; step < 300; ++step) {
      now_ms += static_cast<int64_t>(rng.below(400));
      if (rng.chance(0.2)) {
        const TimePoint now = at_ms(now_ms);
        ASSERT_EQ(set.expire(now), reference.expire(now));
      } else {
        const uint64_t originator = rng.below(nodes);
        // Mostly the same ANSN (a renewal), sometimes a new one.
        if (rng.chance(0.3)) ansn[originator] = static_cast<uint16_t>(ansn[originator] + 1 + rng.below(3));
        std::vector<NodeId> advertised;
        const uint64_t count = rng.below(6);
        for (uint64_t i = 0; i < count; ++i) advertised.push_back(node(rng.below(nodes)));
        const TimePoint until = at_ms(now_ms + 500 + static_cast<int64_t>(rng.below(3000)));
        ASSERT_EQ(set.ansn_of(node(originator)), reference.ansn_of(node(originator)));
        ASSERT_EQ(set.apply_tc(node(originator), ansn[originator], advertised, until),
                  reference.apply_tc(node(originator), ansn[originator], advertised, until));
      }
      ASSERT_EQ(set.tuples(), reference.tuples());
      ASSERT_EQ(set.earliest_expiry(), reference.earliest_expiry());
      ASSERT_EQ(set.size(), reference.tuples().size());
      std::vector<std::pair<NodeId, NodeId>> edges;
      for (const auto& e : set.edges()) edges.emplace_back(e.last, e.dest);
      std::vector<std::pair<NodeId, NodeId>> expected;
      for (const auto& t : reference.tuples()) expected.emplace_back(t.last, t.dest);
      ASSERT_EQ(edges, expected);
      // The recorded changes, replayed on the edges of the step before, give
      // this step's edges: each added edge was not held, each removed one was.
      for (const TopologySet::EdgeChange& change : set.changes()) {
        const std::pair edge{change.edge.last, change.edge.dest};
        if (change.added) {
          ASSERT_TRUE(replayed.insert(edge).second) << "added twice";
        } else {
          ASSERT_EQ(replayed.erase(edge), 1u) << "removed but not held";
        }
      }
      set.clear_changes();
      ASSERT_EQ(std::vector(replayed.begin(), replayed.end()), expected);
    }
  }
}

TEST(TopologySet, ANewerAnsnReplacesAnOriginatorsTuples) {
  TopologySet set;
  const std::vector<NodeId> first{node(3), node(1), node(2)};
  EXPECT_TRUE(set.apply_tc(node(0), 7, first, at_ms(1000)));
  EXPECT_EQ(set.ansn_of(node(0)), 7);
  // The same TC again only renews.
  EXPECT_FALSE(set.apply_tc(node(0), 7, first, at_ms(2000)));
  const std::vector<NodeId> second{node(2)};
  EXPECT_TRUE(set.apply_tc(node(0), 8, second, at_ms(3000)));
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.tuples()[0], (TopologySet::Tuple{node(0), node(2), 8, at_ms(3000)}));
  EXPECT_FALSE(set.expire(at_ms(2999)));
  EXPECT_TRUE(set.expire(at_ms(3000)));
  EXPECT_EQ(set.size(), 0u);
  EXPECT_FALSE(set.ansn_of(node(0)).has_value());
}

}  // namespace
}  // namespace mesh::routing::olsr
