#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/node_id.h"
#include "core/rng.h"
#include "membership/hop_distances.h"
#include "membership/medley_options.h"

namespace mesh::membership {

// Medley's weights: w = hops^-alpha, normalised. A member without a known
// route counts as one hop farther than the farthest known member (it is
// probably far, and probing it often would only produce false suspicions).
std::vector<double> distance_weights(const std::vector<core::NodeId>& members, const HopDistances& distances,
                                     double alpha);

// Copies per member in one bag round: Medley's ceil(w / w_min), flattened
// (the scale shrunk until the bag fits) when that exceeds `limit` copies in
// total. Every member gets at least one copy. `limit` >= members.size().
std::vector<uint64_t> bag_copies(const std::vector<double>& weights, size_t limit);

// Draws ping targets. In bag order every member present for a whole round is
// probed at least once per round, so the gap between two probes of a member
// is below two rounds (2 * bag_limit_factor * N draws at most); in
// independent order draws are i.i.d. by weight.
class ProbeTargetSelector {
 public:
  ProbeTargetSelector(double alpha, ProbeOrder order, size_t bag_limit_factor);

  // The candidates (live members other than self). Members that disappear
  // are skipped when drawn; new ones are inserted at random places in the
  // current round, unless the list has grown by more than a quarter since
  // the round was built: then a new round starts.
  void set_members(const std::vector<core::NodeId>& members, const HopDistances& distances, core::Rng& rng);
  std::optional<core::NodeId> next(const HopDistances& distances, core::Rng& rng);

  // Multiplies `id`'s share of the draws by about `factor` (> 1) until
  // end_boost(id) (Medley's active feedback: a member probed too rarely
  // asked for it): each draw first picks it with chance (factor - 1) * w,
  // w its weight, at most one half. Drawn apart from the bag, so the boost
  // starts and ends at once (a bag round can last thousands of periods)
  // and leaves the round's completeness bound alone. Boosting a boosted
  // member, or one not among the candidates, changes nothing.
  void boost(core::NodeId id, double factor, const HopDistances& distances);
  void end_boost(core::NodeId id) { boosts_.erase(id); }
  bool boosted(core::NodeId id) const { return boosts_.contains(id); }

  // Bag size of the round being drawn (0 in independent order).
  size_t round_size() const { return round_size_; }
  size_t round_limit() const { return bag_limit_factor_ * members_.size(); }

 private:
  void refill(const HopDistances& distances, core::Rng& rng);

  double alpha_;
  ProbeOrder order_;
  size_t bag_limit_factor_;
  bool is_member(core::NodeId id) const;

  std::vector<core::NodeId> members_;  // sorted
  std::vector<core::NodeId> bag_;      // drawn from the back
  std::map<core::NodeId, double> boosts_;  // extra chance per draw, by member
  size_t round_size_ = 0;
  size_t round_members_ = 0;  // members when the round was built
};

// Up to `count` ping-req helpers for `target`, drawn without replacement
// with weight hops(helper, target)^-alpha when the topology is known, else
// hops(self, helper)^-alpha as Medley does. Never the target.
std::vector<core::NodeId> pick_helpers(const std::vector<core::NodeId>& candidates, core::NodeId target, size_t count,
                                       double alpha, const HopDistances& distances, core::Rng& rng);

}  // namespace mesh::membership
