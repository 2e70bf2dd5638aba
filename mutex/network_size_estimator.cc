#include "mutex/network_size_estimator.h"

#include <algorithm>
#include <cmath>

namespace mesh::mutex {

size_t NetworkSizeEstimator::upper(core::TimePoint now) {
  const double scaled = std::ceil(static_cast<double>(known_ids(now)) * (1.0 + std::max(0.0, options_.margin)));
  return std::max(options_.floor, static_cast<size_t>(scaled));
}

size_t NetworkSizeEstimator::known(core::TimePoint now) { return std::max(options_.floor, known_ids(now)); }

std::vector<core::NodeId> NetworkSizeEstimator::known_nodes(core::TimePoint now) const {
  std::vector<core::NodeId> ids;
  for (const auto& [id, seen] : last_seen_) {
    if (now - seen <= options_.window) ids.push_back(id);
  }
  return ids;
}

size_t NetworkSizeEstimator::known_ids(core::TimePoint now) {
  std::erase_if(last_seen_, [&](const auto& entry) { return now - entry.second > options_.window; });
  return last_seen_.size();
}

}  // namespace mesh::mutex
