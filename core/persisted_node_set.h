#pragma once

#include <set>
#include <string>

#include "core/metrics.h"
#include "core/node_id.h"
#include "core/storage.h"

namespace mesh::core {

// A set of node ids kept in one storage key ("a,b,c"), rewritten whenever it
// changes. Layers use it to remember whom they have seen across a restart:
// a restarted node's member list is empty until membership has joined it
// again, and a decision that needs "how large is the mesh" (a majority, a
// quorum of votes) must not be taken on that empty list.
//
// A put that fails is logged and counted in `write_failures`; the set in
// memory stays correct and the caller goes on (every layer that persists
// reports a failing storage). Malformed ids in the stored value are skipped,
// logged and counted in `unreadable`.
class PersistedNodeSet {
 public:
  PersistedNodeSet(Storage& storage, std::string key, size_t max_nodes, std::string log_component,
                   Counter& write_failures, Counter& unreadable);

  // The ids remembered from earlier lives (and this one).
  const std::set<NodeId>& nodes() const { return nodes_; }
  // Adds `id`; persists when it is new and the set has room.
  void remember(NodeId id);
  // Drops `id` and persists, if it was there.
  void forget(NodeId id);

  const std::string& key() const { return key_; }

 private:
  void write();

  Storage& storage_;
  std::string key_;
  size_t max_nodes_;
  std::string log_component_;
  Counter& write_failures_;
  std::set<NodeId> nodes_;
};

}  // namespace mesh::core
