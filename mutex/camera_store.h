#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/metrics.h"
#include "core/node_id.h"
#include "core/persisted_node_set.h"
#include "core/storage.h"

namespace mesh::mutex {

// What Camera keeps across a restart, in core::Storage:
//
// - per resource, a reservation above every fencing high-water mark this node
//   has used or shown to another node ("mutex/token/<hash of name>"). Marks
//   only ever rise through cover(); a mark above the reservation first
//   writes mark + token_block, so the storage sees one write per token_block
//   tokens, and a restarted node resumes at the reservation: its marks and
//   tokens never fall below anything it told the mesh before the crash.
// - the node ids it has heard of ("mutex/nodes"), so that a restarted node,
//   whose member list is empty or partial until membership has joined it
//   again, still knows whom to ask and how large the mesh is.
//
// A put that fails is logged and counted; Camera goes on (the agent's
// storage failing is reported by every layer that persists).
class CameraStore {
 public:
  CameraStore(core::Storage& storage, core::Metrics& metrics, uint64_t token_block, size_t max_nodes);

  // The reservation a previous life left for `resource` (0 if none). An
  // unreadable value counts as `unreadable_fallback` and is logged.
  uint64_t restore_high_water(const std::string& resource, uint64_t unreadable_fallback);
  // Makes the reservation of `resource` at least `mark`.
  void cover(const std::string& resource, uint64_t mark);

  // The ids remembered from earlier lives (and this one).
  // Sorted, each once.
  const std::vector<core::NodeId>& nodes() const { return nodes_.nodes(); }
  // Adds `id`; persists when it is new and the set has room.
  void remember(core::NodeId id) { nodes_.remember(id); }
  // Drops `id` (it left the mesh, or stopped answering while unlisted).
  void forget(core::NodeId id) { nodes_.forget(id); }

  static std::string token_key(const std::string& resource);
  static constexpr const char* kNodesKey = "mutex/nodes";

 private:
  core::Storage& storage_;
  core::Counter& write_failures_;
  core::Counter& unreadable_;
  uint64_t token_block_;
  std::unordered_map<std::string, uint64_t> reserved_;
  core::PersistedNodeSet nodes_;
};

}  // namespace mesh::mutex
