// Medley's target distribution: chi-square goodness of fit against
// hops^-alpha with the Env's generator, the bag's completeness bound, and
// helper selection. Failing checks print the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <set>

#include "membership/probe_target_selector.h"

namespace mesh::membership {
namespace {

class FixedHops final : public HopDistances {
 public:
  std::map<core::NodeId, uint32_t> to;
  std::map<std::pair<core::NodeId, core::NodeId>, uint32_t> between;
  std::optional<uint32_t> hops_to(core::NodeId id) const override {
    auto it = to.find(id);
    if (it == to.end()) return std::nullopt;
    return it->second;
  }
  std::optional<uint32_t> hops_between(core::NodeId a, core::NodeId b) const override {
    auto it = between.find({a, b});
    if (it == between.end()) return std::nullopt;
    return it->second;
  }
};

core::NodeId node(uint32_t i) { return core::NodeId(0x0a000000u + i); }

// Members at the given hop counts.
std::vector<core::NodeId> members_at(const std::vector<uint32_t>& hops, FixedHops& distances) {
  std::vector<core::NodeId> out;
  for (uint32_t i = 0; i < hops.size(); ++i) {
    out.push_back(node(i + 2));
    distances.to[out.back()] = hops[i];
  }
  return out;
}

// Pearson's statistic over categories with expected probabilities p.
double chi_square(const std::map<core::NodeId, uint64_t>& counts, const std::vector<core::NodeId>& members,
                  const std::vector<double>& p, uint64_t draws) {
  double chi = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const double expected = p[i] * static_cast<double>(draws);
    auto it = counts.find(members[i]);
    const double observed = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    chi += (observed - expected) * (observed - expected) / expected;
  }
  return chi;
}

// Upper 0.1 % point of chi-square with k degrees of freedom
// (Wilson-Hilferty), so a correct sampler fails once in a thousand seeds.
double chi_square_critical(double k) {
  const double z = 3.09;
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

const std::vector<uint32_t> kHops = {1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 5, 6, 7, 8};

TEST(DistanceWeights, FollowInversePowerOfHops) {
  FixedHops d;
  const auto members = members_at({1, 2, 4}, d);
  const auto w = distance_weights(members, d, 2.0);
  const double sum = 1.0 + 0.25 + 0.0625;
  EXPECT_NEAR(w[0], 1.0 / sum, 1e-12);
  EXPECT_NEAR(w[1], 0.25 / sum, 1e-12);
  EXPECT_NEAR(w[2], 0.0625 / sum, 1e-12);
  // alpha = 0 is uniform (plain SWIM).
  for (double x : distance_weights(members, d, 0.0)) EXPECT_NEAR(x, 1.0 / 3, 1e-12);
  // No route: one hop farther than the farthest known.
  d.to.erase(members[2]);
  const auto unknown = distance_weights(members, d, 1.0);
  EXPECT_NEAR(unknown[2] / unknown[0], 1.0 / 3, 1e-12);
}

TEST(ProbeTargetSelector, IndependentDrawsMatchInversePowerChiSquare) {
  for (double alpha : {0.0, 1.0, 2.0, 3.0}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      FixedHops d;
      const auto members = members_at(kHops, d);
      core::Rng rng(seed);
      ProbeTargetSelector selector(alpha, ProbeOrder::independent, 10);
      selector.set_members(members, d, rng);
      std::map<core::NodeId, uint64_t> counts;
      const uint64_t draws = 200000;
      for (uint64_t i = 0; i < draws; ++i) ++counts[*selector.next(d, rng)];
      // Expected probabilities computed here, not by the code under test.
      std::vector<double> p;
      double sum = 0;
      for (uint32_t h : kHops) sum += std::pow(static_cast<double>(h), -alpha);
      for (uint32_t h : kHops) p.push_back(std::pow(static_cast<double>(h), -alpha) / sum);
      const double chi = chi_square(counts, members, p, draws);
      EXPECT_LT(chi, chi_square_critical(static_cast<double>(members.size() - 1)))
          << "alpha=" << alpha << " seed=" << seed;
      // And it is not the uniform distribution (for alpha > 0).
      if (alpha > 0) {
        const std::vector<double> uniform(members.size(), 1.0 / static_cast<double>(members.size()));
        EXPECT_GT(chi_square(counts, members, uniform, draws), 10 * chi_square_critical(14.0))
            << "alpha=" << alpha << " seed=" << seed;
      }
    }
  }
}

TEST(ProbeTargetSelector, ExactBagMatchesInversePower) {
  // With integer ratios Medley's bag (ceil(w / w_min) copies) is exact.
  FixedHops d;
  const auto members = members_at({1, 1, 2, 2, 4}, d);
  for (double alpha : {1.0, 2.0, 3.0}) {
    const auto w = distance_weights(members, d, alpha);
    const auto copies = bag_copies(w, 1000);
    uint64_t total = 0;
    for (auto c : copies) total += c;
    for (size_t i = 0; i < members.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(copies[i]) / static_cast<double>(total), w[i], 1e-12) << "alpha=" << alpha;
    }
    // Draws over whole rounds reproduce it exactly.
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      core::Rng rng(seed);
      ProbeTargetSelector selector(alpha, ProbeOrder::bag, 1000);
      selector.set_members(members, d, rng);
      std::map<core::NodeId, uint64_t> counts;
      const uint64_t rounds = 50;
      for (uint64_t i = 0; i < rounds * total; ++i) ++counts[*selector.next(d, rng)];
      for (size_t i = 0; i < members.size(); ++i) {
        EXPECT_EQ(counts[members[i]], rounds * copies[i]) << "alpha=" << alpha << " seed=" << seed;
      }
    }
  }
}

// Active feedback: a boosted member is drawn about `factor` times as often
// as before in both orders, at once, and as before once the boost ends.
TEST(ProbeTargetSelector, BoostRaisesAMembersShare) {
  FixedHops d;
  const auto members = members_at({1, 1, 1, 1, 1, 1, 1, 2}, d);
  const core::NodeId far = members.back();  // weight 1/8 of a neighbour's at alpha 3
  for (ProbeOrder order : {ProbeOrder::bag, ProbeOrder::independent}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      core::Rng rng(seed);
      ProbeTargetSelector selector(3.0, order, 1000);
      selector.set_members(members, d, rng);
      auto share_of_far = [&](int draws) {
        int hits = 0;
        for (int i = 0; i < draws; ++i) hits += *selector.next(d, rng) == far ? 1 : 0;
        return static_cast<double>(hits) / draws;
      };
      const double before = share_of_far(2000);
      selector.boost(far, 4.0, d);
      EXPECT_TRUE(selector.boosted(far));
      const double boosted = share_of_far(2000);
      selector.end_boost(far);
      const double after = share_of_far(2000);
      EXPECT_GT(boosted, 2.5 * before) << "seed=" << seed << " order=" << static_cast<int>(order);
      EXPECT_LT(after, 2.0 * before) << "seed=" << seed << " order=" << static_cast<int>(order);
    }
  }
}

TEST(ProbeTargetSelector, BagFlattenedToLimitKeepsOrder) {
  FixedHops d;
  const auto members = members_at(kHops, d);
  const auto w = distance_weights(members, d, 3.0);
  const size_t limit = 4 * members.size();
  const auto copies = bag_copies(w, limit);
  uint64_t total = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    total += copies[i];
    EXPECT_GE(copies[i], 1u);
    if (i > 0) {
      EXPECT_LE(copies[i], copies[i - 1]) << "nearer members never get fewer copies";
    }
  }
  EXPECT_LE(total, limit);
  EXPECT_GT(copies.front(), copies.back());
}

TEST(ProbeTargetSelector, EveryMemberProbedWithinCompletenessBound) {
  for (double alpha : {0.0, 3.0}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      FixedHops d;
      auto members = members_at(kHops, d);
      core::Rng rng(seed);
      const size_t factor = 4;
      ProbeTargetSelector selector(alpha, ProbeOrder::bag, factor);
      selector.set_members(members, d, rng);
      std::map<core::NodeId, uint64_t> last;
      uint64_t worst_gap = 0;
      const uint64_t draws = 20000;
      for (uint64_t i = 1; i <= draws; ++i) {
        // Churn: a newcomer at draw 5000, a departure at draw 9000.
        if (i == 5000) {
          members.push_back(node(100));
          d.to[node(100)] = 9;
          selector.set_members(members, d, rng);
          last[node(100)] = i;
        }
        if (i == 9000) {
          members.erase(members.begin());
          selector.set_members(members, d, rng);
        }
        const core::NodeId id = *selector.next(d, rng);
        ASSERT_NE(std::find(members.begin(), members.end(), id), members.end()) << "seed=" << seed;
        if (last.contains(id)) worst_gap = std::max(worst_gap, i - last[id]);
        last[id] = i;
      }
      // The most members present at once (16, between the join and the leave).
      const uint64_t most = kHops.size() + 1;
      const uint64_t bound = 2 * factor * most;
      for (core::NodeId m : members) {
        EXPECT_LE(draws - last[m], bound) << "seed=" << seed << " member " << m.to_string() << " starved";
      }
      EXPECT_LE(worst_gap, bound) << "alpha=" << alpha << " seed=" << seed;
      if (alpha == 0.0) {
        EXPECT_LT(worst_gap, 2 * most) << "alpha 0 is round-robin";
      }
    }
  }
}

// A joining node learns its list a few members at a time, usually near ones
// first (their gossip arrives first). A round built over those holds few
// copies of each neighbour (the exact bag is ceil(w / w_min) and w_min is
// only a 2-hop member's weight); far members learnt later each add at least
// one copy, so unless the round is rebuilt as the list grows, far members
// are probed many times more often than hops^-alpha says.
TEST(ProbeTargetSelector, ListLearntInPiecesKeepsTheSkew) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    FixedHops d;
    std::vector<uint32_t> hops;
    for (uint32_t i = 0; i < 90; ++i) hops.push_back(i < 8 ? 1 : i < 12 ? 2 : 3 + i % 11);  // 8 neighbours
    const auto all = members_at(hops, d);
    core::Rng rng(seed);
    const size_t factor = 10;
    ProbeTargetSelector selector(3.0, ProbeOrder::bag, factor);
    // The neighbours and the 2-hop members first, then the rest in pieces of
    // five, one draw between.
    std::vector<core::NodeId> known(all.begin(), all.begin() + 12);
    selector.set_members(known, d, rng);
    ASSERT_TRUE(selector.next(d, rng).has_value());
    for (size_t i = 12; i < all.size(); i += 5) {
      for (size_t k = i; k < std::min(all.size(), i + 5); ++k) known.push_back(all[k]);
      selector.set_members(known, d, rng);
      ASSERT_TRUE(selector.next(d, rng).has_value());
    }
    ASSERT_EQ(known.size(), all.size());
    // The next 100 draws, against the share of neighbours a fresh round holds.
    const std::vector<uint64_t> copies = bag_copies(distance_weights(all, d, 3.0), factor * all.size());
    uint64_t near_copies = 0;
    uint64_t total_copies = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      total_copies += copies[i];
      near_copies += hops[i] == 1 ? copies[i] : 0;
    }
    const uint64_t draws = 100;
    uint64_t near = 0;
    for (uint64_t i = 0; i < draws; ++i) near += d.to[*selector.next(d, rng)] == 1 ? 1 : 0;
    const double expected = static_cast<double>(near_copies) / static_cast<double>(total_copies);
    EXPECT_GT(static_cast<double>(near) / static_cast<double>(draws), expected - 0.15)
        << "seed=" << seed << ": neighbours drawn " << near << " of " << draws << ", expected share " << expected;
  }
}

TEST(PickHelpers, PrefersNodesNearTheTargetAndNeverTheTarget) {
  FixedHops d;
  const core::NodeId target = node(50);
  std::vector<core::NodeId> candidates;
  for (uint32_t i = 0; i < 10; ++i) {
    candidates.push_back(node(i + 2));
    d.to[candidates.back()] = 3;
    d.between[{candidates.back(), target}] = i < 2 ? 1 : 6;  // two helpers next to the target
  }
  candidates.push_back(target);
  std::map<core::NodeId, uint64_t> picked;
  core::Rng rng(3);
  for (int i = 0; i < 2000; ++i) {
    const auto helpers = pick_helpers(candidates, target, 3, 3.0, d, rng);
    ASSERT_EQ(helpers.size(), 3u);
    std::set<core::NodeId> unique(helpers.begin(), helpers.end());
    EXPECT_EQ(unique.size(), 3u);
    EXPECT_FALSE(unique.contains(target));
    for (auto h : helpers) ++picked[h];
  }
  // The two near ones are nearly always among the three.
  EXPECT_GT(picked[node(2)], 1900u);
  EXPECT_GT(picked[node(3)], 1900u);
  // Fewer candidates than asked: all of them.
  EXPECT_EQ(pick_helpers({node(2), target}, target, 3, 3.0, d, rng).size(), 1u);
}

}  // namespace
}  // namespace mesh::membership
