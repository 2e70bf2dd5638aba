#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "core/node_id.h"
#include "core/time.h"
#include "mutex/camera_options.h"

namespace mesh::mutex {

// N.upper for the slow-path switch (camera.md §4.4): the number of distinct
// node ids this node heard of within a sliding window (its own member list,
// requesters, nodes named in OK sets and trees), plus a margin, and never
// below a configured floor. Chosen over the random-walk estimator the paper
// cites because it costs no messages and Camera already hears of every node
// that competes with it; the floor covers a node whose list is so small that
// its own observations cannot reveal the mesh's size.
class NetworkSizeEstimator {
 public:
  explicit NetworkSizeEstimator(NetworkSizeOptions options) : options_(options) {}

  void observe(core::NodeId id, core::TimePoint now) { last_seen_[id] = now; }
  // Forgets ids not observed within the window, then estimates.
  size_t upper(core::TimePoint now);
  // The nodes heard of within the window, never below the floor: what a
  // slow-path tree must cover more than half of to grant. Without the margin,
  // which is there to switch paths early, not to make a majority larger.
  size_t known(core::TimePoint now);
  size_t remembered() const { return last_seen_.size(); }
  // The ids heard of within the window (without pruning the older ones).
  std::vector<core::NodeId> known_nodes(core::TimePoint now) const;

 private:
  size_t known_ids(core::TimePoint now);

  NetworkSizeOptions options_;
  std::unordered_map<core::NodeId, core::TimePoint> last_seen_;
};

}  // namespace mesh::mutex
