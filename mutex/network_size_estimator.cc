#include "mutex/network_size_estimator.h"

#include <algorithm>
#include <cmath>

namespace mesh::mutex {

size_t NetworkSizeEstimator::upper(core::TimePoint now) {
  std::erase_if(last_seen_, [&](const auto& entry) { return now - entry.second > options_.window; });
  const double scaled = std::ceil(static_cast<double>(last_seen_.size()) * (1.0 + std::max(0.0, options_.margin)));
  return std::max(options_.floor, static_cast<size_t>(scaled));
}

}  // namespace mesh::mutex
