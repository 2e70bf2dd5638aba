#pragma once

#include <cstdint>

#include "core/time.h"

namespace mesh::membership {

// Lifeguard's local health multiplier: evidence that this node itself is
// slow or cut off (its probes fail and no helper's nack arrives) raises the
// score; a successful probe lowers it. Timeouts are
// stretched by (score + 1), so a struggling node accuses others more slowly
// instead of flooding the mesh with false suspicions.
class LocalHealth {
 public:
  explicit LocalHealth(uint32_t max_score) : max_(max_score) {}

  void apply(int delta);
  uint32_t score() const { return score_; }
  core::Duration scale(core::Duration d) const { return d * (score_ + 1); }

 private:
  uint32_t max_;
  uint32_t score_ = 0;
};

}  // namespace mesh::membership
