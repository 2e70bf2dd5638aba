#include "membership/local_health.h"

#include <algorithm>

namespace mesh::membership {

void LocalHealth::apply(int delta) {
  const int64_t next = static_cast<int64_t>(score_) + delta;
  score_ = static_cast<uint32_t>(std::clamp<int64_t>(next, 0, max_));
}

}  // namespace mesh::membership
