#include "routing/mpr_selection.h"

#include <gtest/gtest.h>

#include <map>

#include "core/rng.h"
#include "routing/olsr_packet.h"

namespace mesh::routing::olsr {
namespace {

using core::NodeId;

NodeId n(uint8_t i) { return NodeId::from_octets(10, 0, 0, i); }

// Builds the candidates of `self` from an undirected edge list.
std::vector<MprCandidate> candidates_of(NodeId self, const std::vector<std::pair<int, int>>& edges,
                                        const std::map<int, uint8_t>& willingness = {}) {
  std::map<NodeId, std::vector<NodeId>> adjacency;
  for (auto [a, b] : edges) {
    adjacency[n(static_cast<uint8_t>(a))].push_back(n(static_cast<uint8_t>(b)));
    adjacency[n(static_cast<uint8_t>(b))].push_back(n(static_cast<uint8_t>(a)));
  }
  std::vector<MprCandidate> out;
  for (auto neighbour : adjacency[self]) {
    const auto w = willingness.find(static_cast<int>(neighbour.value() & 0xff));
    out.push_back({neighbour, w == willingness.end() ? kWillDefault : w->second, adjacency[neighbour]});
  }
  return out;
}

// Every strict two-hop neighbour reachable through an eligible neighbour is
// reached through some MPR.
void expect_covers(NodeId self, const std::vector<MprCandidate>& cands, const std::set<NodeId>& mprs) {
  std::set<NodeId> one_hop;
  for (const auto& c : cands) one_hop.insert(c.id);
  for (const auto& c : cands) {
    if (c.willingness == kWillNever) continue;
    for (auto t : c.neighbours) {
      if (t == self || one_hop.count(t)) continue;
      bool covered = false;
      for (const auto& m : cands) covered |= mprs.count(m.id) && std::count(m.neighbours.begin(), m.neighbours.end(), t);
      EXPECT_TRUE(covered) << "two-hop " << t.to_string() << " not covered";
    }
  }
}

TEST(MprSelection, LineChoosesTheOnlyWayForward) {
  // 1 - 2 - 3 - 4: node 2 needs 3 to reach 4 and 1 reaches nothing new.
  auto cands = candidates_of(n(2), {{1, 2}, {2, 3}, {3, 4}});
  EXPECT_EQ(select_mprs(n(2), cands), (std::set<NodeId>{n(3)}));
}

TEST(MprSelection, StarCenterCoversAll) {
  // self 1 has neighbours 2, 3, 4; 2 alone reaches 5, 6, 7; 3 reaches 5; 4 reaches 6.
  auto cands = candidates_of(n(1), {{1, 2}, {1, 3}, {1, 4}, {2, 5}, {2, 6}, {2, 7}, {3, 5}, {4, 6}});
  const auto mprs = select_mprs(n(1), cands);
  EXPECT_EQ(mprs, (std::set<NodeId>{n(2)}));
  expect_covers(n(1), cands, mprs);
}

TEST(MprSelection, WillAlwaysIsKeptEvenIfRedundant) {
  auto cands = candidates_of(n(1), {{1, 2}, {1, 3}, {2, 5}, {3, 5}}, {{3, kWillAlways}});
  const auto mprs = select_mprs(n(1), cands);
  EXPECT_TRUE(mprs.count(n(3)));
  EXPECT_FALSE(mprs.count(n(2)));  // pruned: 3 covers 5
}

TEST(MprSelection, WillNeverIsNeverChosen) {
  // 2 (WILL_NEVER) is the only way to 5; 5 is then not counted as covered-needed.
  auto cands = candidates_of(n(1), {{1, 2}, {1, 3}, {2, 5}, {3, 6}}, {{2, kWillNever}});
  const auto mprs = select_mprs(n(1), cands);
  EXPECT_FALSE(mprs.count(n(2)));
  EXPECT_EQ(mprs, (std::set<NodeId>{n(3)}));
}

TEST(MprSelection, HigherWillingnessWinsTies) {
  auto cands = candidates_of(n(1), {{1, 2}, {1, 3}, {2, 5}, {3, 5}}, {{2, kWillLow}, {3, kWillHigh}});
  EXPECT_EQ(select_mprs(n(1), cands), (std::set<NodeId>{n(3)}));
}

TEST(MprSelection, NoTwoHopNeighboursNoMprs) {
  auto cands = candidates_of(n(1), {{1, 2}, {1, 3}, {2, 3}});
  EXPECT_TRUE(select_mprs(n(1), cands).empty());
}

TEST(MprSelection, RandomGraphsAreAlwaysCovered) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    core::Rng rng(seed);
    std::vector<std::pair<int, int>> edges;
    const int nodes = 4 + static_cast<int>(rng.below(20));
    for (int a = 1; a <= nodes; ++a) {
      for (int b = a + 1; b <= nodes; ++b) {
        if (rng.chance(0.2)) edges.push_back({a, b});
      }
    }
    std::map<int, uint8_t> will;
    for (int i = 2; i <= nodes; ++i) will[i] = static_cast<uint8_t>(rng.below(8));
    auto cands = candidates_of(n(1), edges, will);
    const auto mprs = select_mprs(n(1), cands);
    expect_covers(n(1), cands, mprs);
    for (const auto& c : cands) {
      if (c.willingness == kWillNever) {
        EXPECT_FALSE(mprs.count(c.id));
      }
      if (c.willingness == kWillAlways) {
        EXPECT_TRUE(mprs.count(c.id));
      }
    }
  }
}

}  // namespace
}  // namespace mesh::routing::olsr
