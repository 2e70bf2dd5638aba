#include "membership/probe_target_selector.h"

#include <algorithm>
#include <cmath>

namespace mesh::membership {
namespace {

// Index drawn with probability weights[i] / sum.
size_t weighted_index(const std::vector<double>& weights, double sum, core::Rng& rng) {
  double x = rng.unit() * sum;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  // Rounding left x just above the last weight.
  for (size_t i = weights.size(); i-- > 0;) {
    if (weights[i] > 0) return i;
  }
  return 0;
}

// At most this chance per draw goes to one boosted member.
constexpr double kMaxBoostChance = 0.5;

uint64_t total_copies(const std::vector<double>& weights, double scale) {
  uint64_t total = 0;
  for (double w : weights) total += std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(w * scale - 1e-9)));
  return total;
}

}  // namespace

std::vector<double> distance_weights(const std::vector<core::NodeId>& members, const HopDistances& distances,
                                     double alpha) {
  std::vector<std::optional<uint32_t>> hops;
  hops.reserve(members.size());
  uint32_t farthest = 0;
  for (core::NodeId m : members) {
    hops.push_back(distances.hops_to(m));
    if (hops.back()) farthest = std::max(farthest, *hops.back());
  }
  std::vector<double> weights;
  weights.reserve(members.size());
  double sum = 0;
  for (const auto& h : hops) {
    const double d = std::max<uint32_t>(1, h ? *h : farthest + 1);
    weights.push_back(std::pow(d, -alpha));
    sum += weights.back();
  }
  for (double& w : weights) w /= sum;
  return weights;
}

std::vector<uint64_t> bag_copies(const std::vector<double>& weights, size_t limit) {
  std::vector<uint64_t> copies(weights.size(), 1);
  if (weights.empty()) return copies;
  const double w_min = *std::min_element(weights.begin(), weights.end());
  double scale = 1.0 / w_min;
  if (total_copies(weights, scale) > limit) {
    // Largest scale whose bag fits; at scale 0 every member has one copy.
    double lo = 0.0;
    double hi = scale;
    for (int i = 0; i < 60; ++i) {
      const double mid = (lo + hi) / 2;
      (total_copies(weights, mid) <= limit ? lo : hi) = mid;
    }
    scale = lo;
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    copies[i] = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(weights[i] * scale - 1e-9)));
  }
  return copies;
}

ProbeTargetSelector::ProbeTargetSelector(double alpha, ProbeOrder order, size_t bag_limit_factor)
    : alpha_(alpha), order_(order), bag_limit_factor_(std::max<size_t>(1, bag_limit_factor)) {}

void ProbeTargetSelector::set_members(const std::vector<core::NodeId>& members, const HopDistances& distances,
                                      core::Rng& rng) {
  std::vector<core::NodeId> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (sorted == members_) return;
  std::vector<core::NodeId> added;
  std::set_difference(sorted.begin(), sorted.end(), members_.begin(), members_.end(), std::back_inserter(added));
  members_ = std::move(sorted);
  if (order_ != ProbeOrder::bag || bag_.empty() || added.empty()) return;
  // A round built over far fewer members (a node joining learns the list a
  // few at a time) flattened the skew for that small list: far members got
  // many copies, and inserting newcomers keeps them. Once the list has grown
  // by more than a quarter the round is rebuilt; that happens O(log N) times
  // while joining, so the completeness bound holds once the list settles.
  if (4 * members_.size() > 5 * round_members_) {
    bag_.clear();
    return;
  }
  // Newcomers join the current round at random places, with as many copies
  // as a refill would give them.
  const std::vector<double> weights = distance_weights(members_, distances, alpha_);
  const std::vector<uint64_t> copies = bag_copies(weights, round_limit());
  for (core::NodeId id : added) {
    const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), id) - members_.begin());
    for (uint64_t c = 0; c < copies[index]; ++c) {
      const size_t at = static_cast<size_t>(rng.below(bag_.size() + 1));
      bag_.insert(bag_.begin() + static_cast<std::ptrdiff_t>(at), id);
    }
  }
}

// A binary search of the sorted list: a tree beside it was rebuilt, a node
// per member, every time a member joined or left.
bool ProbeTargetSelector::is_member(core::NodeId id) const {
  return std::binary_search(members_.begin(), members_.end(), id);
}

void ProbeTargetSelector::boost(core::NodeId id, double factor, const HopDistances& distances) {
  if (factor <= 1.0 || boosts_.contains(id) || !is_member(id)) return;
  const std::vector<double> weights = distance_weights(members_, distances, alpha_);
  const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), id) - members_.begin());
  // Drawn first with this chance each time, the member's share grows from
  // w to about factor * w; capped so a boosted neighbour never crowds out
  // the rest.
  boosts_.emplace(id, std::min(kMaxBoostChance, (factor - 1.0) * weights[index]));
}

void ProbeTargetSelector::refill(const HopDistances& distances, core::Rng& rng) {
  const std::vector<double> weights = distance_weights(members_, distances, alpha_);
  const std::vector<uint64_t> copies = bag_copies(weights, round_limit());
  bag_.clear();
  for (size_t i = 0; i < members_.size(); ++i) bag_.insert(bag_.end(), copies[i], members_[i]);
  std::shuffle(bag_.begin(), bag_.end(), rng);
  round_size_ = bag_.size();
  round_members_ = members_.size();
}

std::optional<core::NodeId> ProbeTargetSelector::next(const HopDistances& distances, core::Rng& rng) {
  if (members_.empty()) return std::nullopt;
  for (const auto& [id, chance] : boosts_) {
    if (is_member(id) && rng.unit() < chance) return id;
  }
  if (order_ == ProbeOrder::independent) {
    const std::vector<double> weights = distance_weights(members_, distances, alpha_);
    return members_[weighted_index(weights, 1.0, rng)];
  }
  // At most one refill: after it every entry is a current member.
  for (int pass = 0; pass < 2; ++pass) {
    while (!bag_.empty()) {
      const core::NodeId id = bag_.back();
      bag_.pop_back();
      if (is_member(id)) return id;
    }
    refill(distances, rng);
  }
  return std::nullopt;
}

std::vector<core::NodeId> pick_helpers(const std::vector<core::NodeId>& candidates, core::NodeId target, size_t count,
                                       double alpha, const HopDistances& distances, core::Rng& rng) {
  std::vector<core::NodeId> pool;
  std::vector<double> weights;
  uint32_t farthest = 0;
  std::vector<std::optional<uint32_t>> hops;
  for (core::NodeId c : candidates) {
    if (c == target) continue;
    auto h = distances.hops_between(c, target);
    if (!h) h = distances.hops_to(c);
    pool.push_back(c);
    hops.push_back(h);
    if (h) farthest = std::max(farthest, *h);
  }
  for (const auto& h : hops) weights.push_back(std::pow(std::max<uint32_t>(1, h ? *h : farthest + 1), -alpha));
  std::vector<core::NodeId> chosen;
  while (chosen.size() < count && !pool.empty()) {
    double sum = 0;
    for (double w : weights) sum += w;
    const size_t i = weighted_index(weights, sum, rng);
    chosen.push_back(pool[i]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    weights.erase(weights.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return chosen;
}

}  // namespace mesh::membership
